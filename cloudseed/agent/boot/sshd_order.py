"""Whether a reboot's sshd must wait for the network stage: the record the shell generator reads at
the next boot, and the local stage's confirmation of the generator's early sshd.

On a first boot sshd and logins start after the network stage (users, keys, sshd settings). At the
reboot of an unchanged instance most of that stage's work is per-boot work that sshd never reads
(bootcmd, growpart, resizefs, /etc/hosts, the hostname), so the generator may let sshd start as it
would without an agent (docs/lab.md, "Reboots where sshd does not wait"). It decides from:

* ``/var/lib/cloudseed/data/reboot-order``, written here at the end of every boot (and removed by
  the next one's local stage, so that it only ever describes a boot that went to its end)
  (``key=value`` lines the generator reads with the shell's ``read``): the instance, what the boot
  showed of it (the generator's ``/run/cloudseed/identity``: the seed filesystem or the DMI UUID,
  kept only when it is this instance's), the host keys sshd serves, the configuration files read,
  and ``sshd=free`` or ``sshd=wait: why``: whether anything the next boot's network stage does
  (or a per-boot module of a later stage) touches what sshd or a login reads;
* this boot's facts (the identity, the host keys, the configuration files and their times).

When it lets sshd go early it writes ``/run/cloudseed/sshd-early``. The local stage, which reads the
datasource before networking and so before sshd, then checks what the generator could not (the
instance id itself, user-data, vendor-data, the image's configuration) and writes
``sshd-early.confirmed``; without it ``cloudseed-hold-sshd.service`` makes sshd wait after all.
"""

from __future__ import annotations

import logging
import re

from cloudseed.agent.state import PER_BOOT

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from cloudseed.agent.boot.boot_state import BootState
    from cloudseed.agent.datasources import Datasource
    from cloudseed.agent.modules import ModuleContext

LOG = logging.getLogger("cloudseed.sshd_order")

RECORD = "/var/lib/cloudseed/data/reboot-order"
FORMAT = "1"
IDENTITY = "/run/cloudseed/identity"  # the generator's: what this boot shows of the instance
EARLY = "/run/cloudseed/sshd-early"  # the generator's: sshd does not wait this boot (and why)
CONFIRMED = "/run/cloudseed/sshd-early.confirmed"  # the local stage's: it agrees
REFUSED = "/run/cloudseed/sshd-early.refused"  # the local stage's: it does not (why); sshd waits
CONFIG_FILES = ("/etc/cloud/cloud.cfg", "/etc/cloud/cloud.cfg.d", "/etc/cloudseed/cloud.cfg",
                "/etc/cloudseed/cloud.cfg.d")
SETTING = "sshd_early_on_reboot"  # false: sshd waits for the network stage at every boot

# init-stage modules whose run at a reboot changes nothing sshd or a login reads
QUIET_INIT = frozenset({"growpart", "resizefs", "set_hostname", "update_hostname", "update_etc_hosts",
                        "seed_random", "ca_certs", "rsyslog", "resolv_conf"})
# modules of any stage that change sshd's settings, host keys, users, their keys or passwords
SSHD_MODULES = frozenset({"ssh", "users_groups", "set_passwords", "ssh_import_id"})
# commands run at every boot (bootcmd, boothooks): a word naming what sshd, a login or the network
# in front of sshd depends on keeps sshd waiting (a safety net for the plain cases; the setting
# above is the sure way)
# (compiled when the boot's end looks, through re's cache: not at the import, before READY=1)
SSHD_WORDS = (r"ssh|authorized_keys|/home|passwd|shadow|pam|nologin|user(?:add|mod|del)|"
              r"mount|iptables|nft|ufw|firewall|hosts\.(?:allow|deny)|selinux|semanage")
BLOBS = ("user-data", "vendor-data", "vendor-data2")


def sshd_waits_for(ctx: ModuleContext, cfg: dict, state: BootState) -> str:
    """Why sshd must wait for the network stage at this instance's next boot ("" when nothing does)."""
    from cloudseed.agent.boot import strict
    from cloudseed.agent.modules import STAGE_LIST_KEYS, declared_spec, is_active, parse_entry, supports
    from cloudseed.agent.state import Semaphores
    from cloudseed.core.values import get_list

    if cfg.get(SETTING) is False:
        return f"{SETTING} is false"
    if strict.settings(state.system_cfg, state.cmdline, state.datasource) is not None:
        return "strict mode is on (sshd waits for the boot's verdict)"
    sems = Semaphores(ctx.paths, ctx.instance_id)
    for stage in ("init", "config", "final"):
        for entry in get_list(cfg, STAGE_LIST_KEYS[stage]):
            try:
                name, frequency, _ = parse_entry(entry)
                spec = declared_spec(name)  # no import
            except (ValueError, ImportError):
                continue  # not run at all (its stage reports it)
            if stage != "init" and spec.name not in SSHD_MODULES:
                continue  # config and final run after sshd has started at every boot
            frequency = frequency or spec.frequency
            if not is_active(spec, cfg) or (spec.distros and not supports(spec, ctx.distro)):
                continue
            if frequency != PER_BOOT and sems.has_run(spec.name, frequency):
                continue
            when = "at every boot" if frequency == PER_BOOT else "again (it has not completed)"
            if spec.name == "bootcmd":
                word = _sshd_word(_command_text(cfg.get("bootcmd")))
                if word:
                    return f"bootcmd runs at every boot and names '{word}'"
            elif spec.name in SSHD_MODULES or stage == "init" and spec.name not in QUIET_INIT:
                return f"module {spec.name} runs {when}"
    return _userdata_reason(state)


def _userdata_reason(state: BootState) -> str:
    """What of this instance's user-data runs at every boot and may touch what sshd reads."""
    import json

    ds = state.datasource
    if ds is None:
        return "no datasource"
    idir = state.paths.instance_dir(ds.instance_id)
    try:
        processed = json.loads(state.root.read_text(f"{idir}/user-data.processed.json"))
    except (OSError, ValueError):
        processed = {}
    if processed.get("handlers"):
        return "user-data has part-handlers (run at every boot)"
    for part in processed.get("boothooks") or []:
        word = _sshd_word(str(part.get("content", "")))
        if word:
            return f"boothook {part.get('name', '?')} runs at every boot and names '{word}'"
    for blob in (ds.userdata_raw, ds.vendordata_raw, ds.vendordata2_raw):
        if _fetches_includes(blob):
            return "user-data has #include URLs, fetched again at every boot"
    return ""


def _command_text(commands: object) -> str:
    if isinstance(commands, (list, tuple)):
        return "\n".join(_command_text(c) for c in commands)
    return "" if commands is None else str(commands)


def _sshd_word(text: str) -> str:
    found = re.search(SSHD_WORDS, text, re.I)
    return found.group(0) if found else ""


def _fetches_includes(blob: bytes | str | None) -> bool:
    if not blob:
        return False
    data = blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else bytes(blob)
    if data[:2] == b"\x1f\x8b":
        return True  # compressed: not opened here just to look (the slow order is the safe one)
    lowered = data.lower()
    return lowered.count(b"#include") > lowered.count(b"#include-once") or b"x-include-url" in lowered


def hostkeys(state: BootState) -> list[str]:
    """The host key files sshd serves: those there now, and those still being made (deferred RSA)."""
    from cloudseed.agent.hostkeys import KEY_DIR, STAGING_DIR

    names = {name for name in state.root.listdir(KEY_DIR) if name.startswith("ssh_host_") and name.endswith("_key")}
    for name in state.root.listdir(STAGING_DIR):  # ssh_host_T_key when written, T.pid while being made
        if name.startswith("ssh_host_") and name.endswith("_key"):
            names.add(name)
        elif name.endswith(".pid"):
            names.add(f"ssh_host_{name[:-4]}_key")
    return [f"{KEY_DIR}/{name}" for name in sorted(names)]


def config_files(state: BootState) -> list[str]:
    """The image's configuration files, as the generator lists them."""
    found = []
    for inner in CONFIG_FILES:
        if inner.endswith(".d"):
            found += [f"{inner}/{n}" for n in sorted(state.root.listdir(inner))
                      if n.endswith(".cfg") and state.root.isfile(f"{inner}/{n}")]
        elif state.root.isfile(inner):
            found.append(inner)
    return found


def config_stamp(system_cfg: dict) -> str:
    """A checksum of the image's merged configuration (what the local stage compares)."""
    import json
    import zlib

    text = json.dumps(system_cfg, sort_keys=True, default=str)
    return f"{zlib.crc32(text.encode('utf-8', 'surrogatepass')):08x}"


def record(state: BootState, ctx: ModuleContext, cfg: dict) -> None:
    """At the end of the boot: what the next boot's generator reads (written when it changes)."""
    ds, root = state.datasource, state.root
    if ds is None:
        return
    seen = identity_of(root.read_text(IDENTITY, default="").strip(), ds)
    waits = sshd_waits_for(ctx, cfg, state)
    configs = config_files(state)
    lines = ["# cloudseed: what the next boot's generator reads to order sshd (cloudseed/agent/boot/sshd_order.py)",
             f"format={FORMAT}", f"instance_id={ds.instance_id}", f"identity={seen}",
             f"hostkeys={' '.join(hostkeys(state))}", f"configs={' '.join(configs)}",
             f"config={config_stamp(state.plain_cfg)}", f"sshd={'wait: ' + waits if waits else 'free'}"]
    root.write(RECORD, "\n".join(_one_line(line) for line in lines) + "\n", mode=0o644)
    LOG.info("next boot: sshd %s", f"waits ({waits})" if waits else "may start beside the network stage")


def identity_of(seen: str, ds: Datasource) -> str:
    """``seen`` (what the generator saw this boot) when it is ``ds``'s instance's, else ""."""
    kind, _, rest = seen.partition(" ")
    words = rest.split(" ")
    if kind in ("seed", "dir") and words[0].lower() != ds.name.lower():
        return ""  # the generator found another datasource's seed
    if kind == "dir" and words[-1] != ds.instance_id:
        return ""  # the seed directory's instance-id line is not this instance's id
    if kind == "dmi" and rest.lower() != ds.instance_id.lower():
        return ""  # a DMI UUID names the instance only where it is its id (Nova)
    return seen if kind in ("seed", "dir", "dmi") else ""


def forget(state: BootState) -> None:
    """No record (the network stage failed): the next boot keeps sshd after the network stage."""
    state.root.remove(RECORD)


def _one_line(text: str) -> str:
    return text.replace("\n", " ").replace("\r", " ")


def consume(state: BootState, ds: Datasource | None, new_instance: bool) -> None:
    """The local stage: agree with the generator's early sshd (or let sshd wait after all), then
    remove the record: it describes a boot that went to its end, and this one has not yet."""
    root = state.root
    if root.exists(EARLY):
        _confirm(state, ds, new_instance)
    root.remove(RECORD)


def _confirm(state: BootState, ds: Datasource | None, new_instance: bool) -> None:
    root = state.root
    why = _disagreement(state, ds, new_instance)
    if why:
        root.write(REFUSED, why + "\n", mode=0o644)
        LOG.warning("sshd waits for the network stage after all: %s", why)
        return
    root.write(CONFIRMED, "instance, its data and the image's configuration as at the last boot\n", mode=0o644)


def _disagreement(state: BootState, ds: Datasource | None, new_instance: bool) -> str:
    if ds is None:
        return "no datasource found before networking"
    if new_instance:
        return f"a new instance ({ds.instance_id})"
    fields = dict(line.split("=", 1) for line in state.root.read_text(RECORD, default="").splitlines()
                  if "=" in line and not line.startswith("#"))
    if fields.get("instance_id") != ds.instance_id:
        return f"the record is of instance {fields.get('instance_id')!r}, this is {ds.instance_id!r}"
    if fields.get("sshd") != "free":
        return "the record does not say sshd may go early"
    if fields.get("config") != config_stamp(state.plain_cfg):
        return "the image's configuration changed"
    idir = state.paths.instance_dir(ds.instance_id)
    for name, blob in zip(BLOBS, (ds.userdata_raw, ds.vendordata_raw, ds.vendordata2_raw)):
        data = blob.encode("utf-8") if isinstance(blob, str) else bytes(blob or b"")
        try:
            kept = state.root.read_bytes(f"{idir}/{name}.txt")
        except OSError:
            kept = None
        if kept != data:
            return f"{name} changed"
    return ""
