"""Helpers shared by the network tests: a fake /sys/class/net tree."""

from __future__ import annotations

import os


def add_dev(top, name, mac="52:54:00:00:00:01", carrier=1, operstate="up", arptype=1, devtype=None,
            bridge=False, bond=False, driver="virtio_net"):
    d = top / "sys/class/net" / name
    d.mkdir(parents=True)
    if mac is not None:
        (d / "address").write_text(mac + "\n")
    if carrier is not None:
        (d / "carrier").write_text(f"{carrier}\n")
    if operstate is not None:
        (d / "operstate").write_text(operstate + "\n")
    (d / "type").write_text(f"{arptype}\n")
    (d / "uevent").write_text(f"INTERFACE={name}\n" + (f"DEVTYPE={devtype}\n" if devtype else ""))
    if bridge:
        (d / "bridge").mkdir()
    if bond:
        (d / "bonding").mkdir()
    if driver:
        drv = top / "sys/bus/drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        (d / "device").mkdir()
        os.symlink(str(drv), d / "device" / "driver")
    return d
