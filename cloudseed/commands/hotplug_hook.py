"""``cloudseed hotplug-hook --subsystem net handle --devpath P --udevaction add|remove``: a NIC came or went.

Run by the udev hook that the ``install_hotplug`` module installs (only while hotplug is enabled:
its rule is present). A metadata service datasource (OpenStack, Ec2) is read again first, as
cloud-init does, so a NIC attached after boot is in its network config; the refreshed record
replaces the cache when it is the same instance, and the cache is used when the service does not
answer (or with ``--cached``). The network configuration is then chosen as at boot (kernel command
line, system config, the datasource, fallback), rendered and written again through
``cloudseed.network``; on a running system the renderer's tools then bring the added device up
(``ifup`` for ENI and sysconfig, ``netplan apply``, ``networkctl reload``/``reconfigure``,
``nmcli``). As in cloud-init 24.1+: ``query`` says whether hotplug is enabled (the datasource can do
it, and ``updates.network.when`` or ``enable`` asked for it); ``enable`` (root) turns it on for
this instance (``/var/lib/cloudseed/hotplug.enabled``, kept by the ``install_hotplug`` module at
later boots) and installs the udev rule at once. Exit status: 0 done (or nothing to do), 1 the
configuration could not be applied (or, for ``query``, no datasource known), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys

HELP = "handle a network device hot-plug event (run by udev)"
RULE = "/etc/udev/rules.d/90-cloudseed-hook-hotplug.rules"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--subsystem", "-s", required=True, choices=("net",),
                        help="the udev subsystem of the event (only net is handled)")
    sub = parser.add_subparsers(dest="hotplug_action", metavar="ACTION")
    sub.add_parser("query", help="print whether hotplug is enabled for this instance")
    sub.add_parser("enable", help="enable hotplug for this instance, whatever its user-data says (root)")
    handle = sub.add_parser("handle", help="apply the network configuration for an added or removed device")
    handle.add_argument("--devpath", "-d", required=True, metavar="PATH",
                        help="the device's sysfs path as udev gives it (DEVPATH)")
    handle.add_argument("--udevaction", "-u", required=True, choices=("add", "remove"),
                        help="the udev action (ACTION)")
    handle.add_argument("--cached", action="store_true",
                        help="use the cached datasource as it is (do not read the metadata service again)")


def run(args: argparse.Namespace) -> int:
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    if args.hotplug_action in ("query", "enable"):
        return query(root) if args.hotplug_action == "query" else enable(root)
    if args.hotplug_action != "handle":
        print("cloudseed hotplug-hook: give an action: query, enable or handle", file=sys.stderr)
        return 2
    name = args.devpath.rstrip("/").rsplit("/", 1)[-1]
    if not name or name in (".", ".."):
        print(f"cloudseed hotplug-hook: --devpath {args.devpath!r} names no device", file=sys.stderr)
        return 2
    if not root.exists(RULE):
        print(f"cloudseed hotplug-hook: hotplug is not enabled for this instance ({RULE} absent); "
              f"{name} {args.udevaction} ignored")
        return 0
    from cloudseed.agent.boot.lock import run_locked
    from cloudseed.agent.state.log import setup_logging

    setup_logging(root, debug=args.debug, stage="hotplug")
    return run_locked(root, "hotplug-hook", lambda: _handle(root, name, args))


def _handle(root, name: str, args: argparse.Namespace) -> int:
    report = apply(root, name, args.udevaction, refresh=not args.cached)
    for error in report["errors"]:
        print(f"cloudseed hotplug-hook: {error}", file=sys.stderr)
    print(f"cloudseed hotplug-hook: {name} {args.udevaction}: {report['outcome']}")
    return 1 if report["errors"] else 0


# datasources read again for an event: their service describes NICs attached after boot
REFRESHED = ("openstack", "ec2", "vmware", "hetzner")


def _hotplug_state(root):
    """(cached datasource or None, why it cannot do hotplug or None, asked for by config or command)."""
    from cloudseed.agent.boot.boot_state import BootState
    from cloudseed.agent.boot.instances import load_datasource
    from cloudseed.agent.modules.install_hotplug import enabled_by_command, hotplug_supported, hotplug_wanted
    from cloudseed.agent.state import read_json

    state = BootState.load(root)
    ds = load_datasource(state)
    if ds is None:
        return None, None, False
    cfg = read_json(root, state.paths.combined_config_file)   # the instance's cloud-config merged in
    try:
        wanted = hotplug_wanted(cfg if isinstance(cfg, dict) else state.system_cfg)
    except Exception:  # noqa: BLE001 - a malformed setting is the module's to report; here it asks for nothing
        wanted = False
    return ds, hotplug_supported(ds), wanted or enabled_by_command(root)


def query(root) -> int:
    """``enabled`` when this instance's datasource can do hotplug and it was asked for (cloud-init 24.1)."""
    ds, why_not, wanted = _hotplug_state(root)
    if ds is None:
        print("Unable to determine hotplug state. No datasource detected")
        return 1
    print("enabled" if why_not is None and wanted else "disabled")
    return 0


def enable(root) -> int:
    """Enable network hotplug on this instance (``hotplug.enabled``) and install the udev rule now."""
    import json
    import os

    from cloudseed.agent.modules import ModuleError
    from cloudseed.agent.modules.install_hotplug import ENABLED_FILE, enabled_by_command, install

    if root.is_live and os.geteuid() != 0:
        print("Root is required. Try prepending your command with sudo.", file=sys.stderr)
        return 1
    ds, why_not, _ = _hotplug_state(root)
    if ds is None or why_not is not None:
        print(f"hotplug not supported for event of net: {why_not or 'no datasource detected'}", file=sys.stderr)
        return 1
    if enabled_by_command(root):
        print("Not installing hotplug for event of type net. Reason: Already done.", file=sys.stderr)
        return 0
    try:
        install(root, ds.name)
    except ModuleError as e:
        print(f"cloudseed hotplug-hook: {e}", file=sys.stderr)
        return 1
    root.write(ENABLED_FILE, json.dumps({"scopes": ["network"]}), mode=0o640)
    print("Enabled cloud-init hotplug for subsystem=net")
    return 0


def apply(root, device: str, action: str, refresh: bool = True) -> dict:
    """Render and write the network config again for an event on ``device``; a report dict."""
    import logging

    from cloudseed.agent.boot.boot_state import BootState
    from cloudseed.agent.boot.instances import load_datasource
    from cloudseed.agent.distros import family_of, read_os_release
    from cloudseed.network import NetworkConfigError
    from cloudseed.network.apply import _renderer_priority, choose_source
    from cloudseed.network.parsers import parse
    from cloudseed.network.renderers import get_renderer, select

    log = logging.getLogger("cloudseed.hotplug")
    report: dict = {"outcome": "", "errors": [], "files": []}
    state = BootState.load(root)
    ds = load_datasource(state)
    if ds is None:
        report["errors"].append("no cached datasource for this instance (has the agent run on this boot?)")
        return report
    if refresh and ds.name.lower() in REFRESHED:
        ds = refreshed(state, ds, log)
    source, config = choose_source(root, state.system_cfg, ds.network_config, state.cmdline, report["errors"])
    if config is None:
        report["outcome"] = f"network configuration disabled by {source}; nothing done"
        return report
    distro = family_of(read_os_release(root))
    try:
        renderer_name = select(root, distro, _renderer_priority(state.system_cfg))
        renderer = get_renderer(renderer_name)
        if source == "fallback":
            from cloudseed.network.fallback import fallback_config

            config = fallback_config(root)
            if not config:
                report["outcome"] = "no network config given and no NIC for the fallback; nothing done"
                return report
        model = parse(config, macs=None, root=root)
        files = renderer.render(model, distro=distro)
    except NetworkConfigError as e:
        report["errors"].append(f"network config from {source}: {e}")
        return report
    from cloudseed.core.root import RootError
    from cloudseed.network.output import write_files

    try:
        report["files"] = write_files(root, files, getattr(renderer, "OWNED", []))
    except (OSError, RootError) as e:
        report["errors"].append(f"writing the network config: {e}")
        return report
    configured = device in {i.name for i in model.ordered()}
    log.info("hotplug %s %s: config from %s rendered by %s (%s)", device, action, source, renderer_name,
             "configured" if configured else "not in the config")
    report["outcome"] = (f"network config from {source} written by {renderer_name}"
                         + ("" if configured or action == "remove" else f"; {device} is not in it"))
    if action == "add" and configured and root.is_live:
        report["errors"] += bring_up(root, renderer_name, model, device)
        if not report["errors"]:
            report["outcome"] += f"; {device} brought up"
    return report


def refreshed(state, cached, log):
    """The datasource read again from its service (and cached), or ``cached`` when that fails."""
    from cloudseed.agent.boot.instances import save_datasource
    from cloudseed.agent.datasources import NETWORK

    fresh = type(cached)(state.ds_context(NETWORK))
    try:
        found = fresh.fetch()
    except Exception as e:  # a service that misbehaves: the cache still describes this instance
        log.warning("hotplug: reading %s again failed (%s: %s); using the cache", cached.name, type(e).__name__, e)
        return cached
    if not found:
        log.warning("hotplug: %s did not answer; using the cached metadata", cached.name)
        return cached
    if fresh.instance_id != cached.instance_id:
        log.warning("hotplug: %s now describes instance %s, not %s; using the cache", cached.name,
                    fresh.instance_id, cached.instance_id)
        return cached
    save_datasource(state, fresh)
    log.info("hotplug: metadata of %s read again from %s", fresh.instance_id, cached.name)
    return fresh


def bring_up(root, renderer: str, model, device: str) -> list:
    """Bring ``device`` up with the renderer's tools; error strings."""
    from cloudseed.network import activators

    errors = activators.after_write(root, renderer, model)
    if renderer in ("eni", "sysconfig"):
        from cloudseed.core.root import CommandError

        try:
            root.run(["ifup", device], timeout=activators.TIMEOUT)
        except CommandError as e:
            errors.append(str(e))
        return errors
    return errors + activators.activate(root, renderer, model)
