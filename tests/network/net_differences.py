"""Where cloudseed deliberately renders differently from Debian's cloud-init 22.4 and 26.x, and why.

Each rule names a difference, the renderers it applies to, why we differ, the releases it differs
from (where 22.4 and 26.x disagree, cloudseed renders as 26.x), and a predicate that
recognises one differing fact (a tuple from ``net_semantic.py``) as that difference. ``side`` is
``"ours"`` for a fact only cloudseed's output has and ``"ref"`` for one only cloud-init's has.
A corpus case passes when every differing fact is explained by a rule; the report counts how
many cases matched exactly and how many only through these rules.

Most rules are cloud-init bugs (things it drops or gets wrong); a few are choices where both
outputs work and ours is more explicit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

ALL = ("eni", "netplan", "networkd", "sysconfig", "network-manager")
DYNAMIC6 = ("dhcp6", "ipv6_slaac", "ipv6_dhcpv6-stateless", "ipv6_dhcpv6-stateful")


@dataclass
class Ctx:
    model: object            # cloudseed's NetworkModel of the case
    ours: set
    ref: set

    def iface(self, name):
        return self.model.interfaces.get(name)

    def types(self, name) -> set:
        i = self.iface(name)
        return {s.type for s in i.subnets} if i else set()


@dataclass
class Rule:
    name: str
    renderers: tuple
    why: str
    test: Callable
    oracles: tuple = ("22.4", "new")   # the releases it differs from


def _is_member_of(ctx, name, kind):
    i = ctx.iface(name)
    return bool(i and i.master and ctx.model.interfaces[i.master].type == kind)


def _global_route(ctx, fact) -> bool:
    return fact[0] == "route" and any(
        fact[2] == r.destination and fact[3] == r.gateway for r in ctx.model.routes)


def _iface_dns(ctx, fact) -> bool:
    """A nameserver/search domain given at interface level (v1 nameserver+interface, v2)."""
    if fact[0] not in ("dns", "search", "ifcfg-dns", "ifcfg-search"):
        return False
    value = fact[-1]
    return any(value in i.nameservers or value in i.search for i in ctx.model.interfaces.values())


def _prefix_zero(ctx, fact, side) -> bool:
    if fact[0] == "route" and side == "ref":
        return fact[2] in ("0.0.0.0/24", "::/64") and any(r.is_default for i in ctx.model.interfaces.values()
                                                          for r in i.all_routes())
    if side == "ours" and fact[0] == "route" and fact[2] in ("0.0.0.0/0", "::/0"):
        return any(f[0] == "route" and f[1] == fact[1] and f[2] in ("0.0.0.0/24", "::/64") for f in ctx.ref)
    if side == "ours" and fact[0] == "ifcfg" and fact[2] in ("GATEWAY", "DEFROUTE", "IPV6_DEFAULTGW"):
        return any(f[0] == "route" and f[1] == fact[1] and f[2] in ("0.0.0.0/24", "::/64") for f in ctx.ref)
    if side == "ours" and fact[0] == "nm" and fact[3] == "gateway":
        return any(f[0] == "route" and f[1] == fact[1] and f[2] in ("0.0.0.0/24", "::/64") for f in ctx.ref)
    return False


def _metric_dropped(ctx, fact, side) -> bool:
    if fact[0] != "route":
        return False
    if side == "ours" and fact[4] is not None:
        return (fact[0], fact[1], fact[2], fact[3], None) in ctx.ref
    if side == "ref" and fact[4] is None:
        return any(f[:4] == fact[:4] and f[4] is not None for f in ctx.ours)
    return False


def _bridge_zero(ctx, fact, side) -> bool:
    return side == "ours" and fact[0] == "opt" and fact[3] in ("bridge-fd", "bridge-maxwait") and fact[4] == "0"


def _virtual_mac(ctx, fact, side) -> bool:
    if side != "ours":
        return False
    i = ctx.iface(fact[1]) if len(fact) > 1 else None
    if i is None or i.type == "physical" or not i.mac:
        return False
    return (fact[0] == "opt" and fact[3] == "hwaddress") or \
        (fact[0] == "ifcfg" and fact[2] == "MACADDR") or \
        (fact[0] == "nm" and fact[3] == "cloned-mac-address")


RULES = [
    Rule("slaac-is-not-dhcpv6", ("netplan", "networkd"),
         "cloud-init writes `dhcp6: true` for ipv6_slaac; SLAAC is router advertisements, so we write "
         "`accept-ra: true` (IPv6AcceptRA=yes), and say so explicitly for stateless DHCPv6 too.",
         lambda c, f, s: (s == "ref" and f[0] == "dhcp6" and "ipv6_slaac" in c.types(f[1])) or
         (s == "ours" and f[0] == "opt" and f[2:] in (("accept-ra", "true"), ("Network", "IPv6AcceptRA", "true"))
          and c.types(f[1]) & {"ipv6_slaac", "ipv6_dhcpv6-stateless"})),
    Rule("networkd-dhcpv6-variants", ("networkd",),
         "cloud-init's networkd renderer starts DHCPv6 only for `dhcp6`, not for "
         "ipv6_dhcpv6-stateful/-stateless; we do.",
         lambda c, f, s: s == "ours" and f[0] == "dhcp" and f[2] == "ipv6" and
         c.types(f[1]) & {"ipv6_dhcpv6-stateful", "ipv6_dhcpv6-stateless"}),
    Rule("networkd-accept-ra", ("networkd",),
         "cloud-init writes IPv6AcceptRA only next to DHCPv6; we honour accept-ra (OpenStack static IPv6 "
         "turns it off) on every interface.",
         lambda c, f, s: s == "ours" and f[0] == "opt" and f[3] == "IPv6AcceptRA" and
         c.iface(f[1]) is not None and c.iface(f[1]).accept_ra is not None),
    Rule("global-routes-kept", ("netplan", "sysconfig", "network-manager", "networkd"),
         "cloud-init's netplan, sysconfig and NetworkManager renderers drop v1 `route` entries (and "
         "networkd copies them onto every interface); we put each on the interface that reaches its gateway.",
         lambda c, f, s: _global_route(c, f)),
    Rule("interface-nameservers-kept", ALL,
         "cloud-init loses nameservers bound to an interface (v1 `nameserver` with `interface`; v2 "
         "`nameservers` on an interface without static addresses) and its ENI renderer writes them as a "
         "Python dict in a bogus `dns` option; we write them.",
         lambda c, f, s: (s == "ours" and _iface_dns(c, f)) or
         (s == "ref" and f[0] == "opt" and f[3] == "dns" and f[4].startswith("{"))),
    Rule("prefix-zero", ALL,
         "cloud-init drops `prefix: 0` as a false value and defaults to /24, turning a v1 default route "
         "into a route to 0.0.0.0/24.",
         lambda c, f, s: _prefix_zero(c, f, s)),
    Rule("route-metric-kept", ("eni", "networkd", "sysconfig", "network-manager"),
         "cloud-init's v2 parser drops route metrics, and its NetworkManager renderer drops every route "
         "metric; we keep them.",
         lambda c, f, s: _metric_dropped(c, f, s)),
    Rule("zero-values-kept", ("eni",),
         "cloud-init skips options whose value is 0 (bridge_fd 0 disappears); 0 is a value.",
         lambda c, f, s: _bridge_zero(c, f, s)),
    Rule("bridge-timers", ("sysconfig", "network-manager"),
         "cloud-init's sysconfig and NetworkManager renderers do not map a bridge's forward delay, "
         "ageing, hello and max-age times; we do (DELAY=, bridge.forward-delay...).",
         lambda c, f, s: s == "ours" and (
             (f[0] == "ifcfg" and f[2] in ("DELAY", "HELLO_TIME", "MAX_AGE")) or
             (f[0] == "nm" and f[2] == "bridge" and f[3] in ("forward-delay", "ageing-time", "hello-time",
                                                              "max-age")))),
    Rule("virtual-mac-kept", ("eni", "sysconfig", "network-manager"),
         "cloud-init drops the MAC of v2 bonds, and its sysconfig/NetworkManager renderers ignore the MAC "
         "of VLANs and bonds; we set it (hwaddress, MACADDR=, ethernet.cloned-mac-address).",
         lambda c, f, s: _virtual_mac(c, f, s)),
    Rule("eni-bond-options-on-master", ("eni",),
         "cloud-init copies every bond option onto each member stanza; ifenslave reads them from the "
         "bond's own stanza, where both write them.",
         lambda c, f, s: s == "ref" and f[0] == "opt" and f[3].startswith("bond-") and f[3] != "bond-master"
         and _is_member_of(c, f[1], "bond")),
    Rule("eni-auto-for-lower-devices", ("eni",),
         "cloud-init leaves interfaces without subnets (VLAN links, bridge ports) without `auto`, so "
         "`ifup -a` never applies their MTU; we mark them auto.",
         lambda c, f, s: s == "ours" and f[0] == "auto" and c.iface(f[1]) is not None and
         not c.iface(f[1]).subnets),
    Rule("eni-mtu-with-dhcp", ("eni",),
         "cloud-init writes `mtu` in `inet dhcp`/`inet6 auto` stanzas, which ifupdown ignores; we set the "
         "MTU with `pre-up ip link set dev X mtu N`.",
         lambda c, f, s: (s == "ref" and f[0] == "mtu-ignored") or
         (s == "ours" and f[0] == "mtu" and any(g[0] == "mtu-ignored" and g[1] == f[1] for g in c.ref))),
    Rule("eni-inet6-options", ("eni",),
         "cloud-init writes interface options only on the first stanza, so accept_ra and `dhcp 1` for a "
         "later inet6 stanza are lost or land on the inet stanza (where ifupdown ignores them).",
         lambda c, f, s: f[0] == "opt" and f[3] in ("accept-ra", "dhcp") and
         ((s == "ours" and f[2] == "inet6") or (s == "ref" and f[2] == "inet"))),
    Rule("networkd-virtual-devices", ("networkd",),
         "cloud-init's networkd renderer is experimental: it writes no .netdev or .link files and no "
         "Bond=/Bridge=/VLAN= links, so it cannot create bonds, bridges or VLANs or rename NICs, and it "
         "matches a bond or VLAN by the MAC it should be given. We write them.",
         lambda c, f, s: (s == "ours" and (f[0] in ("netdev", "link") or (
             f[0] == "opt" and f[2] == "Network" and f[3] in ("Bond", "Bridge", "VLAN", "PrimarySlave")) or (
             f[0] == "opt" and f[2:4] == ("Link", "MACAddress")))) or
         (s == "ref" and f[0] == "match" and f[2] == "MACAddress" and c.iface(f[1]) is not None and
          c.iface(f[1]).type != "physical")),
    Rule("sysconfig-ipv6-dynamic", ("sysconfig",),
         "cloud-init only notices IPv6 for subnet types ending in 6, so SLAAC and DHCPv6 stateless/"
         "stateful configs get no NETWORKING_IPV6=yes in /etc/sysconfig/network.",
         lambda c, f, s: s == "ours" and f[0] == "sysnet" and f[1] in ("NETWORKING_IPV6", "IPV6_AUTOCONF")),
    Rule("sysconfig-stateful-no-dhcpv4", ("sysconfig",),
         "cloud-init sets BOOTPROTO=dhcp for ipv6_dhcpv6-stateful, which also starts DHCPv4 nobody asked for.",
         lambda c, f, s: f[0] == "ifcfg" and f[2] == "BOOTPROTO" and "ipv6_dhcpv6-stateful" in c.types(f[1])
         and "dhcp4" not in c.types(f[1])),
    Rule("sysconfig-nm-dns-none", ("sysconfig",),
         "cloud-init tells NetworkManager to leave resolv.conf alone only for global nameservers; "
         "per-interface servers written by initscripts need it as much.",
         lambda c, f, s: s == "ours" and f[0] == "nmconf" and f[1:] == ("main", "dns", "none")),
    Rule("nm-udev-renames", ("network-manager",),
         "NetworkManager cannot rename NICs; cloud-init renames them at every boot, we also write udev "
         "rules so the names hold from early boot.",
         lambda c, f, s: s == "ours" and f[0] == "udev-rename"),
    Rule("nm-global-dns", ("network-manager",),
         "cloud-init's NetworkManager renderer drops global nameservers and search domains; we attach "
         "them to the interfaces with address configuration.",
         lambda c, f, s: s == "ours" and f[0] in ("dns", "search") and
         (f[1] in c.model.nameservers or f[1] in c.model.search)),
    Rule("nm-static6-manual", ("network-manager",),
         "cloud-init maps subnet type static6 to ipv6.method=auto (SLAAC) with may-fail; a static "
         "address is method=manual.",
         lambda c, f, s: f[0] == "nm" and f[2] == "ipv6" and f[3] in ("method", "may-fail") and
         c.iface(f[1]) is not None and c.iface(f[1]).static_subnets(6) and not (c.types(f[1]) & set(DYNAMIC6))),
    Rule("nm-ipv4-explicit", ("network-manager",),
         "cloud-init writes no [ipv4] for an interface without IPv4 (NetworkManager then runs DHCPv4) and "
         "maps `manual` to method=auto; we write method=disabled.",
         lambda c, f, s: f[0] == "nm" and f[2] == "ipv4" and (
             (s == "ours" and f[3:] == ("method", "disabled")) or
             (s == "ref" and f[3] in ("method", "may-fail") and "manual" in c.types(f[1])))),
    Rule("nm-bond-options", ("network-manager",),
         "cloud-init's NetworkManager renderer looks bond options up under misspelt keys (bond_miimon; "
         "bond-mode for OpenStack's bond_mode) and has no lacp_rate, so they are dropped.",
         lambda c, f, s: s == "ours" and f[0] == "nm" and f[2] == "bond"),
    Rule("nm-mtu-and-metric", ("network-manager",),
         "cloud-init's NetworkManager renderer sets the MTU only on ethernet connections and ignores "
         "dhcp4-overrides route-metric.",
         lambda c, f, s: s == "ours" and f[0] == "nm" and (
             (f[2] == "ethernet" and f[3] == "mtu" and c.iface(f[1]) is not None and
              c.iface(f[1]).type != "physical") or
             (f[2] == "ipv4" and f[3] == "route-metric" and c.iface(f[1]) is not None and
              "route-metric" in c.iface(f[1]).dhcp4_overrides))),
    # ---- where cloud-init 22.4 and 26.x disagree, cloudseed renders as 26.x: differences from 22.4 only ----
    Rule("nm-autoconnect-priority", ("network-manager",),
         "26.x gives its connections autoconnect-priority=120, above NetworkManager's own defaults; 22.4 did not.",
         lambda c, f, s: s == "ours" and f[0] == "nm" and f[2:4] == ("connection", "autoconnect-priority"),
         oracles=("22.4",)),
    Rule("sysconfig-nm-controlled-dropped", ("sysconfig",),
         "26.x no longer writes NM_CONTROLLED=no (NetworkManager's ifcfg-rh plugin may manage the files); "
         "22.4 did.",
         lambda c, f, s: s == "ref" and f[0] == "ifcfg" and f[2] == "NM_CONTROLLED", oracles=("22.4",)),
    Rule("sysconfig-route-metric-per-family", ("sysconfig",),
         "26.x writes a subnet's or default route's metric as IPV4_ROUTE_METRIC/IPV6_ROUTE_METRIC on RHEL; "
         "22.4 wrote METRIC.",
         lambda c, f, s: f[0] == "ifcfg" and f[2] == ("IPV4_ROUTE_METRIC" if s == "ours" else "METRIC"),
         oracles=("22.4",)),
    Rule("nm-dhcp-both-families-may-fail", ("network-manager",),
         "26.x lets either family fail when both use DHCP/RA (one answering is enough); 22.4 required both.",
         lambda c, f, s: f[0] == "nm" and f[3] == "may-fail" and f[4] == ("true" if s == "ours" else "false"),
         oracles=("22.4",)),
    Rule("nm-dhcpv6-stateful-method", ("network-manager",),
         "26.x maps stateful DHCPv6 to ipv6.method=dhcp; 22.4 to auto.",
         lambda c, f, s: f[0] == "nm" and f[2:4] == ("ipv6", "method") and
         f[4] == ("dhcp" if s == "ours" else "auto") and "ipv6_dhcpv6-stateful" in c.types(f[1]),
         oracles=("22.4",)),
    Rule("nm-bare-bond-disabled", ("network-manager",),
         "26.x disables both families on a bond without addresses of its own (they live on a VLAN above); "
         "22.4 left IPv6 to NetworkManager's default.",
         lambda c, f, s: s == "ours" and f[0] == "nm" and f[2] in ("ipv4", "ipv6") and
         c.iface(f[1]) is not None and c.iface(f[1]).type == "bond" and not c.iface(f[1]).subnets,
         oracles=("22.4",)),
    # ---- deliberate differences from 26.x only (22.4 agrees with cloudseed) ----
    Rule("sysconfig-ipv6-failure-not-fatal", ("sysconfig",),
         "26.x sets IPV6_FAILURE_FATAL=yes for stateful DHCPv6, so an interface whose IPv4 works goes down "
         "when no DHCPv6 server answers; we keep 22.4's non-fatal default.",
         lambda c, f, s: s == "ref" and f[0] == "ifcfg" and f[2] == "IPV6_FAILURE_FATAL", oracles=("new",)),
    Rule("eni-openstack-ipv6-dns-kept", ("eni",),
         "26.x drops an IPv6 nameserver from network_data.json's services on ENI; 22.4 and we keep it.",
         lambda c, f, s: s == "ours" and f[0] == "dns" and ":" in f[1], oracles=("new",)),
    Rule("sysconfig-bond-xmit-hash-policy-kept", ("sysconfig",),
         "26.x loses network_data.json's bond_xmit_hash_policy from BONDING_OPTS; 22.4 and we keep it.",
         lambda c, f, s: s == "ours" and f[0] == "bondopt" and f[2] == "xmit_hash_policy", oracles=("new",)),
]



def explain(renderer: str, side: str, fact: tuple, ctx: Ctx, oracle: str = "22.4"):
    """The rule explaining a differing fact with that release (``22.4`` or ``new``), or None."""
    for rule in RULES:
        if renderer in rule.renderers and oracle in rule.oracles:
            try:
                if rule.test(ctx, fact, side):
                    return rule
            except (IndexError, KeyError, TypeError, AttributeError):
                continue
    return None
