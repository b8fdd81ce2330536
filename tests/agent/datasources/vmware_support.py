"""A VMware guest in a temporary root: its DMI strings and a stand-in for vmware-rpctool that reads
guestinfo values from files (the VMware and OVF tests)."""

from __future__ import annotations

RPCTOOL = """#!/bin/sh
# a stand-in for vmware-rpctool: guestinfo values are files under /guestinfo
case "$1" in
  "info-get guestinfo."*)
    k=${1#info-get guestinfo.}
    if [ -f "/guestinfo/$k" ]; then cat "/guestinfo/$k"; else printf 'No value found' >&2; exit 1; fi ;;
  "info-set guestinfo."*)
    rest=${1#info-set guestinfo.}
    k=${rest%% *}
    v=${rest#* }
    printf '%s=%s\\n' "$k" "$v" >> /guestinfo-set.log
    printf '%s' "$v" > "/guestinfo/$k" ;;
  *) printf 'unknown command' >&2; exit 2 ;;
esac
"""


DMI = {"product_name": "VMware Virtual Platform", "sys_vendor": "VMware, Inc.",
       "product_uuid": "4230A1B2-C3D4-E5F6-0718-293A4B5C6D7E"}


def setup_vm(root, values: dict[str, str], tool: str = RPCTOOL, name: str = "vmware-rpctool",
             dmi: dict[str, str] = DMI) -> None:
    for key, value in dmi.items():
        root.write(f"/sys/class/dmi/id/{key}", value + "\n")
    root.write(f"/usr/bin/{name}", tool, mode=0o755)
    root.makedirs("/guestinfo")
    for key, value in values.items():
        root.write(f"/guestinfo/{key}", value)
