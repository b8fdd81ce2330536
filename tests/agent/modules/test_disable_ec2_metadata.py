"""disable_ec2_metadata: a real prohibit route in a network namespace of our own; nothing offline."""

from __future__ import annotations

import subprocess
import sys

from tests.agent.modules.module_support import run

GUEST_CODE = """
import sys
from cloudseed.agent.modules import ModuleContext
from cloudseed.agent.modules.disable_ec2_metadata import handle
from cloudseed.agent.state import Paths
from cloudseed.core.root import TargetRoot
root = TargetRoot("/")
ctx = ModuleContext(root, Paths(root), {"disable_ec2_metadata": True}, "i-test", "config")
handle(ctx)
handle(ctx)   # every boot runs it; twice in one boot is harmless
"""


def test_prohibit_route_is_set_in_the_running_system(netns):
    proc = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", GUEST_CODE],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    routes = subprocess.run(["ip", "-n", netns, "route", "show", "table", "main"], capture_output=True,
                            text=True, check=True).stdout
    assert "prohibit 169.254.169.254" in routes
    for other in ("169.254.42.42", "100.100.100.200"):      # every cloud's address, not EC2's only
        assert f"prohibit {other}" in routes
    probe = subprocess.run(["ip", "netns", "exec", netns, "ip", "route", "get", "169.254.169.254"],
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "permission denied" in probe.stderr.lower()   # a prohibit route: EACCES


def test_offline_root_changes_no_routing_table(target):
    target.makedirs("/usr/bin")
    target.write("/usr/bin/ip", "#!/bin/sh\nexit 1\n", mode=0o755)   # it must not even be run
    result, _ = run(target, "disable_ec2_metadata", {"disable_ec2_metadata": True})
    assert result.status == "ok", result.reason


def test_false_leaves_the_address_alone(target):
    result, _ = run(target, "disable_ec2_metadata", {"disable_ec2_metadata": False})
    assert result.status == "ok", result.reason   # nothing to do, and nothing looked for


def test_no_routing_tool_is_named(target):
    result, _ = run(target, "disable_ec2_metadata", {"disable_ec2_metadata": True})
    assert result.status == "failed" and "neither 'ip' nor 'route' is installed" in result.reason
