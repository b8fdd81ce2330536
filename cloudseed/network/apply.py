"""The local stage's network job: choose the config, render it, write it, maybe bring it up.

Sources, first that gives something wins: the kernel command line (``network-config=``, then
the initramfs's ``ip=``), the system config's ``network:``, the datasource's network config,
and finally the fallback (DHCP on the most likely NIC). ``config: disabled`` in the command line
or the system config (or the datasource) turns everything off.

Config is applied on a new instance only, unless the system config asks for every boot
(``updates: {network: {when: [boot]}}``), and never twice in one boot
(``/run/cloudseed/network-applied``). A config that fails to parse or render falls back to the
fallback config so the instance stays reachable; the error is in the report.

Cheap to import: nothing at the top (not even logging or json); everything loads when used.
"""

from __future__ import annotations

MARKER = "/run/cloudseed/network-applied"
EVERY_BOOT_EVENTS = ("boot", "boot-legacy")


def _boot_id(root) -> str | None:
    try:
        return root.read_text("/proc/sys/kernel/random/boot_id").strip() or None
    except OSError:
        return None


def applied_this_boot(root) -> dict | None:
    """The marker's record when the network was already applied in this boot."""
    import json

    try:
        record = json.loads(root.read_text(MARKER))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    current = _boot_id(root)
    if current is not None and record.get("boot_id") not in (None, current):
        return None          # a marker left from another boot (a persistent /run in a test root)
    return record


def every_boot(system_cfg: dict) -> bool:
    updates = (system_cfg or {}).get("updates") or {}
    when = ((updates.get("network") or {}).get("when")) if isinstance(updates, dict) else None
    return isinstance(when, list) and any(w in EVERY_BOOT_EVENTS for w in when)


def _is_disabled(cfg) -> bool:
    if not isinstance(cfg, dict):
        return False
    inner = cfg.get("network", cfg) if isinstance(cfg.get("network"), dict) else cfg
    return inner.get("config") == "disabled"


def choose_source(root, system_cfg: dict, datasource_config, cmdline: str, errors: list | None = None):
    """``(source, config)``; config None means disabled; source "fallback" means none was given.

    A kernel command line source that cannot be read is reported in ``errors`` and skipped.
    """
    from cloudseed.network import cmdline as kcmd
    from cloudseed.network.errors import NetworkConfigError

    errors = [] if errors is None else errors
    try:
        cfg = kcmd.network_config_from_cmdline(cmdline)
    except NetworkConfigError as e:
        errors.append(str(e))
        cfg = None
    if cfg is not None:
        return "cmdline", (None if _is_disabled(cfg) else cfg)
    try:
        cfg = kcmd.initramfs_config(cmdline, root)
    except (NetworkConfigError, OSError) as e:
        errors.append(f"initramfs network config: {e}")
        cfg = None
    if cfg:
        return "initramfs", cfg
    system_net = (system_cfg or {}).get("network")
    if _is_disabled(system_net):
        return "system_cfg", None
    if isinstance(system_net, dict) and system_net:
        return "system_cfg", system_net
    if isinstance(datasource_config, dict) and datasource_config:
        if _is_disabled(datasource_config):
            return "datasource", None
        return "datasource", datasource_config
    return "fallback", {}


def _renderer_priority(system_cfg: dict):
    info = ((system_cfg or {}).get("system_info") or {}).get("network") or {}
    renderers = info.get("renderers")
    return list(renderers) if isinstance(renderers, list) and renderers else None


def apply_network(root, *, system_cfg: dict, datasource_config: dict | None, cmdline: str, distro: str,
                  new_instance: bool, bring_up: bool) -> dict:
    """Choose, render, write and (optionally) activate the network config; return a report."""
    report: dict = {"source": None, "renderer": None, "files": [], "applied": False,
                    "skipped_reason": None, "errors": [], "warnings": []}
    previous = applied_this_boot(root)
    if previous is not None:
        report.update(source=previous.get("source"), renderer=previous.get("renderer"),
                      skipped_reason="already applied in this boot")
        return report
    from cloudseed.network.errors import NetworkConfigError

    source, config = choose_source(root, system_cfg, datasource_config, cmdline, report["errors"])
    report["source"] = source
    if config is None:
        report["skipped_reason"] = f"network configuration disabled by {source}"
        return report
    if not new_instance and not every_boot(system_cfg):
        report["skipped_reason"] = ("not a new instance (set updates: {network: {when: [boot]}} "
                                    "to apply the network config on every boot)")
        return report
    try:
        from cloudseed.network.renderers import get_renderer, select

        name = select(root, distro, _renderer_priority(system_cfg))
        renderer = get_renderer(name)
    except NetworkConfigError as e:
        report["errors"].append(str(e))
        report["skipped_reason"] = "no network renderer"
        return report
    report["renderer"] = name
    model, files = _model_and_files(root, source, config, renderer, distro, report)
    if files is None:
        report["skipped_reason"] = report["skipped_reason"] or "no usable network configuration"
        return report
    from cloudseed.core.root import RootError
    from cloudseed.network.output import write_files

    try:
        report["files"] = write_files(root, files, getattr(renderer, "OWNED", []))
    except (OSError, RootError) as e:
        report["errors"].append(f"writing the network config: {e}")
        report["skipped_reason"] = "cannot write the network config"
        return report
    report["applied"] = True
    if root.is_live:
        from cloudseed.network import activators

        report["errors"] += activators.rename_interfaces(root, model)
        report["errors"] += activators.after_write(root, name, model)
        if bring_up:
            errors = activators.activate(root, name, model)
            report["errors"] += errors
            report["activated"] = not errors
    _mark(root, report)
    return report


def _model_and_files(root, source: str, config: dict, renderer, distro: str, report: dict):
    """Parse and render; on an error in a given config, fall back to the fallback config."""
    from cloudseed.network.errors import NetworkConfigError
    from cloudseed.network.fallback import fallback_config
    from cloudseed.network.parsers import parse

    attempts = [(source, config)] if source != "fallback" else []
    attempts.append(("fallback", None))
    for src, cfg in attempts:
        if cfg is None:
            cfg = fallback_config(root)
            if not cfg:
                report["skipped_reason"] = "no network config given and no NIC found for the fallback"
                return None, None
        try:
            model = parse(cfg, macs=None, root=root)
            facts = renderer.context(root) if hasattr(renderer, "context") else {}  # of the target system
            files = renderer.render(model, distro=distro, **facts)
        except NetworkConfigError as e:
            import logging

            logging.getLogger("cloudseed.network").error("network config from %s: %s", src, e)
            report["errors"].append(f"{src}: {e}")
            continue
        if src != source:
            report["source"] = f"fallback (after an error in the {source} config)"
        report["warnings"] += model.warnings   # options the renderer could not express, left out
        return model, files
    return None, None


def _mark(root, report: dict) -> None:
    import json
    import time

    record = {"boot_id": _boot_id(root), "time": time.time(), "source": report["source"],
              "renderer": report["renderer"], "files": report["files"]}
    try:
        root.write(MARKER, json.dumps(record, indent=1) + "\n", mode=0o644)
    except OSError as e:
        report["errors"].append(f"cannot record {MARKER}: {e}")
