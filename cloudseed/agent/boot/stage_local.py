"""The local stage: find a datasource that needs no network, adopt its instance, write the network
configuration before networking starts; then start what should overlap with network bring-up
(host key generation, reading ahead the network stage's files).
"""

from __future__ import annotations

import logging

from cloudseed.agent.boot.instances import adopt, find, same_instance_as_last_boot
from cloudseed.agent.datasources import LOCAL
from cloudseed.agent.state import ensure_dirs
from cloudseed.agent.state import instance_data_json as instance_data
from cloudseed.agent.state.log import console
from cloudseed.core.values import as_bool, get_list

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from cloudseed.agent.boot.boot_state import BootState
    from cloudseed.agent.datasources import Datasource
    from cloudseed.core.root import TargetRoot

LOG = logging.getLogger("cloudseed.stages")
REBOOT_ORDER = "/var/lib/cloudseed/data/reboot-order"  # what the generator read to order sshd (sshd_order.py)


def run_local(state: BootState) -> int:
    return state.guarded("local", lambda: _local_stage(state))


def _local_stage(state: BootState) -> int:
    reason = state.disabled_reason()
    if reason:
        state.status.mark_disabled(reason)
        console(f"cloudseed: disabled ({reason})")
        return 0
    errors: list[str] = list(state.config_errors)
    warnings: list[str] = []
    state.redirect_output("local", state.system_cfg, warnings)
    try:
        return _run_local(state, errors, warnings)
    finally:
        state.restore_output()


def _run_local(state: BootState, errors: list[str], warnings: list[str]) -> int:
    started = state.begin("local")
    root, paths = state.root, state.paths
    try:
        state.recorded(errors, ensure_dirs, paths)
        state.record = {}
        state.datasource = None
        root.remove(paths.boot_datasource_file)
        ds = same_instance_as_last_boot(state) or find(state, LOCAL, errors)
        new_instance = False
        if ds is not None:
            try:
                new_instance = adopt(state, ds)
            except OSError as e:  # a full or read-only disk: the boot goes on with it, unrecorded
                LOG.error("%s", e)
                errors.append(f"state not kept: {e}")
                state.datasource = ds
        warnings.extend(getattr(ds, "warnings", []) if ds else [])
        errors.extend(getattr(ds, "errors", []) if ds else [])  # e.g. Azure: the VM not reported ready
        _sweep_state_dirs(state, ds)
        apply_network(state, ds, new_instance, errors, warnings)
        state.recorded(errors, instance_data.save, paths, instance_data.build(root, ds, state.system_cfg))
        if root.exists(REBOOT_ORDER):  # before READY (networking, so sshd, waits): agree with the generator?
            from cloudseed.agent.boot import sshd_order

            sshd_order.consume(state, ds, new_instance)
    except Exception as e:  # the stage itself must finish and say what happened
        LOG.error("local stage failed", exc_info=not isinstance(e, OSError))  # a full disk is no bug
        state.status.crash("local", f"local stage: {type(e).__name__}: {e}")
        return 1
    return state.end("local", started, errors, warnings, [])


def _sweep_state_dirs(state: BootState, ds: Datasource | None) -> None:
    """The temporaries a killed agent left in its own state directories (files there are not all rewritten)."""
    paths = state.paths
    dirs = [f"{paths.data_dir}/data", paths.once_sem_dir]
    if ds is not None:
        dirs += [paths.instance_dir(ds.instance_id), f"{paths.instance_dir(ds.instance_id)}/sem"]
    for inner in dirs:
        state.root.remove_stale_temporaries(inner)


def after_local(state: BootState) -> None:
    """What the local stage starts for later, once networking may start (after READY: networking
    waits for the local stage, and under emulation the key generators' starts and the read-ahead
    took a few tenths of a second on a first boot's critical path): host key generation on a new
    instance (it overlaps with network bring-up) and the read-ahead of the network stage's files."""
    if state.disabled_reason():
        return
    root = state.root
    try:
        if state.record.get("new_instance") or not root.exists(state.paths.current_instance_file):
            start_host_keys_early(state)
        prefetch_for_network_stage(state)
    except Exception as e:  # the network stage makes missing keys itself; the read-ahead is a hint
        LOG.warning("after the local stage: %s: %s", type(e).__name__, e)


def prefetch_for_network_stage(state: BootState) -> None:
    """Have the kernel read ahead the files the network stage imports (it starts after DHCP)."""
    if state.root.is_live:
        from cloudseed.agent.boot import performance

        performance.warm(performance.network_stage_files())


def start_host_keys_early(state: BootState) -> None:
    """Begin SSH host key generation now so it overlaps with network bring-up (ssh adopts them)."""
    cfg = state.system_cfg
    if not as_bool(cfg.get("ssh_deletekeys"), True) or cfg.get("ssh") is False:
        return
    from cloudseed.agent import hostkeys

    types = cfg.get("ssh_genkeytypes", hostkeys.DEFAULT_TYPES)
    try:
        wanted = [str(t) for t in get_list({"t": types}, "t")]
        early = hostkeys.early_types(wanted)
        # at the ordinary priority, not this unit's boost (Nice=-5): two key generators above it
        # took both vCPUs from systemd itself, which then reached network-pre.target up to 1 s
        # after this stage was ready (docs/lab.md); they have until the network stage anyway
        started = hostkeys.start_early(state.root, early, niceness=0)
        # the slow types (RSA: 6 to 13 s of one vCPU under TCG) too, but at niceness 10: at 0 it
        # slowed every first boot by seconds; started here, it lands sooner than from the ssh module
        started += hostkeys.start_early(state.root, [t for t in wanted if t not in early], niceness=10)
    except OSError as e:
        LOG.info("early host key generation not started: %s", e)
        return
    if started:
        LOG.info("host keys %s are being generated in the background", ", ".join(started))


def apply_network(state: BootState, ds: Datasource | None, new_instance: bool,
                  errors: list[str], warnings: list[str]) -> None:
    root, cfg = state.root, state.system_cfg
    network_cfg = cfg.get("network")
    if isinstance(network_cfg, dict) and network_cfg.get("config") == "disabled":
        LOG.info("network configuration is disabled by the system config")
        return
    try:
        from cloudseed.network.apply import apply_network as apply
    except ImportError as e:
        warnings.append(f"network configuration not applied: {e}")
        return
    from cloudseed.agent.distros import family_of, read_os_release

    try:
        report = apply(
            root, system_cfg=cfg,
            datasource_config=ds.network_config if ds else None, cmdline=state.cmdline,
            distro=family_of(read_os_release(root)),
            new_instance=new_instance or not root.exists(state.paths.current_instance_file),
            # at boot the network is not up yet and its own service raises it from these files;
            # when the agent runs on a running system, the new config is activated now
            bring_up=root.is_live and network_is_up(root),
        )
        LOG.info("network: %s", report)
    except Exception as e:
        LOG.error("network configuration failed: %s", e)
        errors.append(f"network: {e}")
        return
    # what was written is in the status too: a config that fell back to DHCP is an error, an
    # option the renderer had to leave out a warning (never only a line in the log)
    errors.extend(f"network: {e}" for e in report.get("errors", []))
    warnings.extend(f"network: {w}" for w in report.get("warnings", []))


def network_is_up(root: TargetRoot) -> bool:
    """Is any interface other than loopback administratively up (a running system, not early boot)?"""
    for name in root.listdir("/sys/class/net"):
        if name == "lo":
            continue
        try:
            flags = int(root.read_text(f"/sys/class/net/{name}/flags", default="0").strip(), 16)
        except ValueError:
            continue
        if flags & 0x1:  # IFF_UP
            return True
    return False
