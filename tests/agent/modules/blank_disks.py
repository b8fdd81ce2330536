"""Blank loop disks for the disk_setup, fs_setup and mounts tests: what they need on the host, and
how they read a disk back (partition table, filesystem tags). The ``loop_disk`` fixture that makes
them is in this directory's conftest.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from cloudseed.core.root import TargetRoot

MIB = 2**20


def needs_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    for tool in tools:
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (scripts/setup.sh)")


def host() -> TargetRoot:
    return TargetRoot("/")


def dump(device: str) -> dict:
    return json.loads(subprocess.run(["sfdisk", "--json", device], capture_output=True, text=True,
                                     check=True).stdout)["partitiontable"]


def blkid(device: str, tag: str) -> str:
    return subprocess.run(["blkid", "-c", "/dev/null", "-p", "-o", "value", "-s", tag, device],
                          capture_output=True, text=True).stdout.strip()
