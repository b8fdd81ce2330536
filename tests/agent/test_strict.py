"""Strict mode (fail closed) over real boots of temporary roots; Azure's NotReady to a real wire server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cloudseed.agent.boot.stages import Agent

SEED = "/var/lib/cloud/seed/nocloud"
MODULES = """\
network: {config: disabled}
cloud_init_modules: [bootcmd]
cloud_config_modules: [runcmd]
cloud_final_modules: [scripts_user]
"""
FAILING_BOOTCMD = "#cloud-config\nbootcmd: ['echo no disk >&2; exit 3']\nruncmd: ['touch /var/tmp/ran']\n"


@pytest.fixture
def hook():
    received = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/", received
    server.shutdown()
    server.server_close()


def boot(root, user: str, meta: str = "instance-id: iid-strict\n", system: str = "", cmdline: str = ""):
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES + system)
    root.write(f"{SEED}/meta-data", meta)
    root.write(f"{SEED}/user-data", user)
    if cmdline:
        root.write("/etc/cloudseed/cmdline", cmdline)
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    agent = Agent(root)
    code = agent.run_all()
    if agent.state.reporter is not None:
        agent.state.reporter.close()
    return code


def status(root) -> tuple[dict, int]:
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, "status", "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    return json.loads(proc.stdout), proc.returncode


def test_off_by_default_a_failing_stage_does_not_stop_the_boot(shell_target):
    root = shell_target
    assert boot(root, FAILING_BOOTCMD) == 1
    assert root.exists("/var/tmp/ran")  # the later stages ran
    assert not root.exists("/run/cloudseed/strict-failed")


def test_an_error_fails_the_boot_closed_and_tells_the_platform(shell_target, hook, capfd):
    root = shell_target
    url, received = hook
    system = f"strict: true\nreporting: {{h: {{type: webhook, endpoint: '{url}'}}}}\n"
    assert boot(root, FAILING_BOOTCMD, system=system) == 1
    console = capfd.readouterr().err
    assert "STRICT MODE: provisioning FAILED in the network stage" in console and "no disk" in console
    assert "logins: user logins refused (/run/nologin); services left alone (not the running system)" in console
    reason = root.read_text("/run/cloudseed/strict-failed")
    assert reason.startswith("strict mode (configuration): the network stage ended with 1 error(s): bootcmd")
    assert not root.exists("/var/tmp/ran")  # nothing built on the failed boot
    shown, code = status(root)
    assert code == 1 and shown["status"] == "error"
    assert any(e.startswith("strict mode") for e in shown["errors"])
    assert any("ran no module: strict mode stopped the boot" in e for e in shown["errors"])
    strict_events = [e for e in received if e["name"] == "init-network/strict"]
    assert [e["event_type"] for e in strict_events] == ["start", "finish"]
    assert strict_events[1]["result"] == "FAIL" and "bootcmd" in strict_events[1]["description"]


def test_logins_are_refused_when_a_module_fails_not_when_its_stage_ends(shell_target):
    root = shell_target
    # final stage: a per-boot script fails, then the user's runcmd script looks at /run/nologin
    root.write("/etc/cloudseed/cloud.cfg.d/10-final.cfg", "cloud_final_modules: [scripts_per_boot, scripts_user]\n")
    root.write("/var/lib/cloud/scripts/per-boot/fails", "#!/bin/sh\nexit 4\n", mode=0o755)
    user = "#cloud-config\nruncmd: ['cp /run/nologin /var/tmp/seen']\n"
    assert boot(root, user, system="strict: {allow_root_login: true}\n") == 1
    seen = root.read_text("/var/tmp/seen")  # already there while the stage went on
    assert seen.startswith("This instance failed to provision: strict mode (configuration): "
                           "the final stage's module scripts_per_boot failed"), seen
    final = root.read_text("/run/nologin")  # the stage's end: the whole reason
    assert "the final stage ended with 1 error(s): scripts_per_boot" in final
    assert "Logins are refused (cloudseed strict mode)" in final


def test_allow_ssh_leaves_logins_alone(shell_target, capfd):
    root = shell_target
    assert boot(root, FAILING_BOOTCMD, system="strict: {allow_ssh: true}\n") == 1
    assert root.exists("/run/cloudseed/strict-failed") and not root.exists("/run/nologin")
    assert "logins: left alone (strict.allow_ssh)" in capfd.readouterr().err


def test_the_reason_is_put_back_after_the_boot_wrote_its_own_nologin(shell_target):
    root = shell_target
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES + "strict: true\n")
    root.write(f"{SEED}/meta-data", "instance-id: iid-strict-tmpfiles\n")
    root.write(f"{SEED}/user-data", FAILING_BOOTCMD)
    agent = Agent(root)
    assert agent.run_local() == 0 and agent.run_network() == 1
    assert "bootcmd" in root.read_text("/run/nologin")
    # what systemd-tmpfiles writes at boot (f+! /run/nologin), when it runs after the agent
    root.write("/run/nologin", "System is booting up. Unprivileged users are not permitted to log in yet.\n")
    assert Agent(root).run_modules("config") == 1  # a stage after the failure: runs nothing
    assert "strict mode (configuration): the network stage ended with 1 error(s): bootcmd" in \
        root.read_text("/run/nologin")


def test_warnings_fail_only_when_asked_by_the_kernel_command_line(shell_target):
    root = shell_target
    warned = "#cloud-config\nnot_a_key: 1\nruncmd: ['touch /var/tmp/ran']\n"
    assert boot(root, warned, cmdline="quiet cloudseed.strict\n") == 0  # errors only: a warning passes
    assert status(root)[0]["extended_status"] == "degraded done"
    assert boot(root, warned, meta="instance-id: iid-strict-2\n", cmdline="quiet cloudseed.strict=warnings\n") == 1
    shown, code = status(root)
    assert code == 1 and "kernel command line" in root.read_text("/run/cloudseed/strict-failed")
    assert "not_a_key" in root.read_text("/run/cloudseed/strict-failed")


def test_the_platform_asks_for_it_in_the_datasource_metadata(shell_target):
    root = shell_target
    user = "#cloud-config\nruncmd: ['exit 5']\n"
    assert boot(root, user, meta="instance-id: iid-strict-md\ncloudseed-strict: true\n") == 1
    reason = root.read_text("/run/cloudseed/strict-failed")
    assert reason.startswith("strict mode (datasource metadata): the final stage ended with 1 error(s)")


def test_azure_failure_reaches_the_wire_server_as_not_ready(tmp_path):
    from cloudseed.agent.datasources._azure_wireserver import report_health
    from tests.provider.server.server_support import ServerProcess

    server = ServerProcess(str(tmp_path / "db.sqlite"), str(tmp_path / "srv"), ["127.0.0.1:0"])
    try:
        iid = "66666666-2222-4333-8444-555555555555"
        server.add(instance_id=iid, addresses=["127.0.0.1"], clouds={"azure": {}})
        reason = "strict mode (configuration): the network stage ended with 1 error(s): bootcmd exited 3 <&>"
        report_health(f"127.0.0.1:{server.port}", "NotReady", "ProvisioningFailed", reason, deadline=10)
        shown = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", server.db_url, "show", iid],
                               capture_output=True, text=True, timeout=60)
        health = json.loads(shown.stdout)["azure_health"]
        assert (health["state"], health["substatus"]) == ("NotReady", "ProvisioningFailed")
        assert health["description"] == reason  # escaped on the wire, whole at the other end
    finally:
        server.stop()
