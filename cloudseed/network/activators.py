"""Making written network config take effect on a running system, per renderer.

``after_write`` is what a renderer's files need even when nothing is brought up yet (netplan's
generator already ran at boot, so ``netplan generate`` runs again). ``activate`` brings the
interfaces up: ``ifup`` (ENI, network-scripts), ``netplan apply``, ``networkctl reload`` and
``reconfigure``, ``nmcli connection reload`` and ``up``. Failures are returned, never raised.
"""

from __future__ import annotations

import logging

from cloudseed.network.model import NetworkModel

LOG = logging.getLogger("cloudseed.network")
TIMEOUT = 120


def _run(root, argv: list, errors: list) -> bool:
    from cloudseed.core.root import CommandError

    try:
        root.run(argv, check=True, timeout=TIMEOUT)
        return True
    except CommandError as e:
        LOG.warning("%s", e)
        errors.append(str(e))
        return False


def after_write(root, renderer: str, model: NetworkModel) -> list:
    """Post-write steps on a live system; returns error strings."""
    errors: list = []
    if renderer == "netplan" and root.which("netplan"):
        _run(root, ["netplan", "generate"], errors)
    return errors


def rename_interfaces(root, model: NetworkModel) -> list:
    """Rename NICs matched by MAC to their configured names, now (udev rules and .link files
    do it from the next boot). Only devices that are down are renamed."""
    from cloudseed.network.sysnet import list_devices

    errors: list = []
    devices = list_devices(root)
    by_mac = {d.mac: d for d in devices if d.kind == "ether" and d.mac and not d.stolen_mac}
    names = {d.name for d in devices}
    for iface in model.ordered():
        if iface.type != "physical" or not iface.set_name or not iface.mac:
            continue
        dev = by_mac.get(iface.mac)
        if dev is None or dev.name == iface.name:
            continue
        if iface.name in names:
            errors.append(f"cannot rename {dev.name} to {iface.name}: that name is taken")
            continue
        if dev.operstate not in ("down", None):
            errors.append(f"not renaming {dev.name} to {iface.name}: it is up")
            continue
        if _run(root, ["ip", "link", "set", "dev", dev.name, "name", iface.name], errors):
            names.discard(dev.name)
            names.add(iface.name)
    return errors


def activate(root, renderer: str, model: NetworkModel) -> list:
    """Bring the configured interfaces up with the renderer's tool; returns error strings."""
    errors: list = []
    names = [i.name for i in model.ordered()]
    if renderer in ("eni", "sysconfig"):
        for name in names:
            _run(root, ["ifup", name], errors)
    elif renderer == "netplan":
        _run(root, ["netplan", "apply"], errors)
    elif renderer == "networkd":
        if _run(root, ["networkctl", "reload"], errors):
            from cloudseed.network.sysnet import list_devices

            present = {d.name for d in list_devices(root)}
            existing = [n for n in names if n in present]
            if existing:
                _run(root, ["networkctl", "reconfigure", *existing], errors)
    elif renderer == "network-manager":
        from cloudseed.network.renderers.network_manager import con_uuid

        if _run(root, ["nmcli", "connection", "reload"], errors):
            for name in names:
                _run(root, ["nmcli", "connection", "up", "uuid", con_uuid(name)], errors)
    else:
        errors.append(f"no activator for renderer {renderer!r}")
    return errors
