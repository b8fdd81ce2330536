"""Cross-checks every parser runs once all interfaces are known."""

from __future__ import annotations

from cloudseed.network.model import NetworkModel, fail, fmt_path


def check_references(model: NetworkModel, members_key: dict, link_key: str, l3_key: str) -> None:
    """Members and VLAN links exist and are used once; bonds have members; members have no L3.

    ``members_key`` maps interface type (bond/bridge) to the key that lists members in the input
    format; ``link_key`` names the VLAN link key; ``l3_key`` the key holding addresses.
    """
    owner: dict[str, str] = {}
    for iface in model.interfaces.values():
        if iface.type in ("bond", "bridge"):
            key = fmt_path(iface.path, members_key[iface.type])
            if iface.type == "bond" and not iface.members:
                raise fail(key, f"bond {iface.name!r} has no member interfaces")
            for i, member in enumerate(iface.members):
                mpath = fmt_path(key, i)
                if member == iface.name:
                    raise fail(mpath, f"{iface.name!r} cannot be a member of itself")
                target = model.interfaces.get(member)
                if target is None:
                    raise fail(mpath, f"interface {member!r} is not defined")
                if iface.type == "bond" and target.type != "physical":
                    raise fail(mpath, f"bond members must be physical interfaces; {member!r} is a {target.type}")
                if target.type == "loopback":
                    raise fail(mpath, "the loopback interface cannot be a member")
                if member in owner:
                    raise fail(mpath, f"interface {member!r} is already a member of {owner[member]!r}")
                owner[member] = iface.name
        if iface.type == "vlan":
            lpath = fmt_path(iface.path, link_key)
            if iface.vlan_link not in model.interfaces:
                raise fail(lpath, f"vlan link {iface.vlan_link!r} is not defined")
            if iface.vlan_link == iface.name:
                raise fail(lpath, "a vlan cannot be its own link")
            if model.interfaces[iface.vlan_link].type in ("loopback", "vlan"):
                raise fail(lpath, f"a vlan cannot sit on {iface.vlan_link!r} "
                                  f"(a {model.interfaces[iface.vlan_link].type})")
    for member, master in owner.items():
        target = model.interfaces[member]
        if target.has_l3:
            raise fail(fmt_path(target.path, l3_key),
                       f"{member!r} is a member of {master!r} and cannot have its own address configuration")
    _check_cycles(model)
    model.link()


def _check_cycles(model: NetworkModel) -> None:
    def lower(name: str) -> list:
        i = model.interfaces[name]
        return list(i.members) + ([i.vlan_link] if i.vlan_link else [])

    state: dict[str, int] = {}

    def visit(name: str) -> None:
        state[name] = 1
        for n in lower(name):
            if state.get(n) == 1:
                raise fail(model.interfaces[name].path, f"interfaces {name!r} and {n!r} form a loop")
            if n in model.interfaces and n not in state:
                visit(n)
        state[name] = 2

    for name in model.interfaces:
        if name not in state:
            visit(name)
