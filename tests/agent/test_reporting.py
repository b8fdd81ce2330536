"""Event reporting (``reporting:``): log, webhook, hyperv and cloudseed handlers over real boots in
temporary roots, a real loopback webhook and a real ``cloudseed serve``; secrets never leave."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from cloudseed.agent.boot.stages import Agent
from cloudseed.agent.reporting import Event, Reporter
from cloudseed.agent.reporting.hyperv import AZURE_VALUE_SIZE, decode_records, encode_event
from cloudseed.core.root import TargetRoot
from tests.agent.webhook import Hook

SEED = "/var/lib/cloud/seed/nocloud"
MODULES = """\
network: {config: disabled}
cloud_init_modules: [bootcmd, write_files]
cloud_config_modules: [byobu, runcmd]
cloud_final_modules: [scripts_user, final_message]
"""
SECRET_PASSWORD = "Hunter2-Sekrit-Pw"
SECRET_TOKEN = "tok-0123456789abcdef"
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n" \
              "-----END OPENSSH PRIVATE KEY-----\n"


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.close()


def seed(root: TargetRoot, user: str, system: str = "") -> None:
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES + system)
    root.write(f"{SEED}/meta-data", "instance-id: iid-report\n")
    root.write(f"{SEED}/user-data", user)


def boot(root: TargetRoot) -> tuple[int, Agent]:
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    agent = Agent(root)
    code = agent.run_all()
    if agent.state.reporter is not None:
        agent.state.reporter.close()  # what the process's exit does
    return code, agent


def test_webhook_gets_every_stage_and_module_with_results_and_no_secret(shell_target, hook):
    root = shell_target
    seed(root, f"""#cloud-config
reporting:
  hook: {{type: webhook, endpoint: "{hook.url}", timeout: 2, retries: 1,
          headers: {{Authorization: "Bearer {SECRET_TOKEN}"}}}}
password: {SECRET_PASSWORD}
chpasswd: {{expire: false, list: ["root:{SECRET_PASSWORD}x"]}}
ssh_keys: {{rsa_private: "{PRIVATE_KEY.strip()}"}}
write_files: [{{path: /etc/demo.conf, content: "x"}}]
bootcmd:
  - echo "the password is {SECRET_PASSWORD}" >&2; exit 5
runcmd:
  - echo "{SECRET_PASSWORD}" > /dev/null; exit 3
""")
    code, _ = boot(root)
    assert code == 1  # runcmd's script failed
    events = [body for _headers, body in hook.received]
    assert all(h["Authorization"] == f"Bearer {SECRET_TOKEN}" for h, _ in hook.received)
    names = [(e["event_type"], e["name"]) for e in events]
    # the local stage ran before user-data configured the hook: replayed from the status
    assert names[0] == ("start", "init-local") and ("finish", "init-local") in names
    for stage in ("init-network", "modules-config", "modules-final"):
        assert ("start", stage) in names and ("finish", stage) in names
    assert ("start", "init-network/config-write_files") in names
    failed = [e for e in events if e.get("result") == "FAIL"]
    assert {e["name"] for e in failed} == {"init-network/config-bootcmd", "init-network",
                                          "modules-final/config-scripts_user", "modules-final"}
    bootcmd = next(e for e in failed if e["name"] == "init-network/config-bootcmd")
    assert "the password is REDACTED" in bootcmd["description"]  # bootcmd's stderr, the secret replaced
    finish = next(e for e in events if e["name"] == "modules-final/config-scripts_user" and e["event_type"] == "finish")
    assert finish["duration"] > 0 and finish["origin"] == "cloudinit" and "failed" in finish["description"]
    assert all(set(e) >= {"name", "description", "event_type", "origin", "timestamp"} for e in events)
    stage_end = next(e for e in events if e["name"] == "init-local" and e["event_type"] == "finish")
    assert stage_end["datasource"] == "NoCloud"
    # modules nothing configured send nothing (cloud-init sends a pair for each; see the package doc)
    assert not any(n.endswith("config-byobu") for _, n in names)
    text = json.dumps(events)
    for secret in (SECRET_PASSWORD, SECRET_TOKEN, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"):
        assert secret not in text
    status = json.loads(root.read_text("/run/cloudseed/status.json"))
    assert SECRET_PASSWORD in root.read_text(f"{SEED}/user-data") and status  # the secret was there to leak


def test_a_dead_or_slow_endpoint_never_holds_the_boot(shell_target):
    slow = Hook(delay=3.0)
    try:
        root = shell_target
        seed(root, "#cloud-config\nruncmd: ['true']\n", system=f"""
reporting:
  slow: {{type: webhook, endpoint: "{slow.url}", timeout: 1}}
  dead: {{type: webhook, endpoint: "http://127.0.0.1:9/boot", timeout: 1, retries: 2}}
""")
        started = time.monotonic()
        shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
        agent = Agent(root)
        assert agent.run_all() == 0
        boot_seconds = time.monotonic() - started
        closing = time.monotonic()
        agent.state.reporter.close()
        assert time.monotonic() - closing < 2.6  # FLUSH_SECONDS in all, then given up
        assert boot_seconds < 8  # not 3 s per event: the stages never waited
        dead = agent.state.reporter.handlers["dead"].sender
        assert dead.sent == 0 and dead.failures >= 1
    finally:
        slow.close()


def test_log_and_hyperv_handlers_write_cloud_inits_records(shell_target):
    root = shell_target
    seed(root, "#cloud-config\nruncmd: ['true']\n", system="""
reporting:
  local: {type: log, level: INFO}
  kvp: {type: hyperv, kvp_file_path: /var/lib/hyperv/.kvp_pool_1}
""")
    code, _ = boot(root)
    assert code == 0
    records = decode_records(root.read_bytes("/var/lib/hyperv/.kvp_pool_1"))
    assert len(records) >= 8
    key, value = records[0]
    parts = key.split("|")
    assert parts[0] == "CLOUD_INIT" and parts[2] == "start" and parts[3] == "init-local" and len(parts) == 6
    meta = json.loads(value)
    assert meta["type"] == "start" and meta["name"] == "init-local" and meta["ts"].endswith("+00:00")
    finishes = [json.loads(v) for k, v in records if k.split("|")[2] == "finish"]
    assert all(f["result"] in ("SUCCESS", "WARN", "FAIL") and "duration" in f for f in finishes)
    log = root.read_text("/var/log/cloudseed.log") if root.exists("/var/log/cloudseed.log") else ""
    assert "finish: modules-final: SUCCESS" in log or log == ""  # logging may be off in a test root


def test_a_long_description_is_split_over_kvp_records_within_azures_limit():
    event = Event("finish", "modules-final/config-x", "é" * 3000 + "end", 1700000000.0, "FAIL", 1.5).as_dict()
    records = decode_records(b"".join(encode_event(event, 1700000000, "vm")))
    assert len(records) > 3
    assert all(len(v.encode()) <= AZURE_VALUE_SIZE for _, v in records)
    assert [k.rsplit("|", 1)[1] for k, _ in records] == [str(i) for i in range(len(records))]
    joined = "".join(json.loads(v)["msg"] for _, v in records)
    assert joined == "é" * 3000 + "end" and json.loads(records[1][1])["msg_i"] == 1


def test_bad_settings_are_named_in_the_status_and_the_boot_goes_on(shell_target):
    root = shell_target
    seed(root, "#cloud-config\nreporting:\n  x: {type: carrier-pigeon}\n  y: {type: webhook}\n"
               "  z: {type: webhook, endpoint: ftp://x, retries: 99}\nruncmd: ['true']\n")
    code, _ = boot(root)
    status = json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]
    warnings = status["init"]["warnings"]
    assert code == 0
    assert any("reporting.x.type: 'carrier-pigeon' is not a handler type (known: cloudseed, hyperv, log, "
               "print, webhook)" in w for w in warnings)
    assert any("reporting.y.endpoint: required for type webhook" in w for w in warnings)
    assert any("reporting.z.endpoint" in w for w in warnings)


def test_a_later_part_removes_a_handler_with_a_false_value(target, hook):
    reporter = Reporter(TargetRoot(str(target.top)))
    reporter.configure({"h": {"type": "webhook", "endpoint": hook.url}})
    reporter.start("init-local", "x")
    reporter.configure({"h": None})
    reporter.start("init-network", "y")
    reporter.close()
    assert [b["name"] for _, b in hook.received] == ["init-local"]


def test_the_cloudseed_handler_reports_to_the_metadata_server(shell_target, tmp_path):
    from tests.provider.server.server_support import ServerProcess

    server = ServerProcess(str(tmp_path / "db.sqlite"), str(tmp_path / "srv"), ["127.0.0.1:0"],
                           config={"imds_tokens": "required"})
    try:
        server.add(instance_id="iid-report", addresses=["127.0.0.1"])
        root = shell_target
        endpoint = f"http://127.0.0.1:{server.port}/cloudseed/v1/events"
        seed(root, "#cloud-config\nruncmd: ['exit 4']\n",
             system=f"reporting: {{platform: {{type: cloudseed, endpoint: '{endpoint}'}}}}\n")
        code, _ = boot(root)
        assert code == 1
        shown = server.admin("GET", "/v1/instances/iid-report/provisioning").json()
        state = shown["provisioning"]
        assert state["state"] == "failed" and state["datasource"] == "NoCloud"
        assert state["failure"]["name"] == "modules-final/config-scripts_user"
        names = [r["name"] for r in shown["reports"]]
        assert names[0] == "init-local" and names[-1] == "modules-final"
    finally:
        server.stop()


def test_no_reporting_imports_nothing_new_on_the_boot_path(shell_target):
    root = shell_target
    seed(root, "#cloud-config\nruncmd: ['true']\n")
    code = subprocess.run(
        [sys.executable, "-c", "import sys; from cloudseed.agent.boot.stages import Agent; "
         "from cloudseed.core.root import TargetRoot; a = Agent(TargetRoot(sys.argv[1])); a.run_all(); "
         "print(sorted(m for m in sys.modules if 'reporting' in m))", root.top],
        capture_output=True, text=True, timeout=120)
    assert code.returncode == 0, code.stderr
    assert code.stdout.strip().splitlines()[-1] == "[]"


def test_stages_in_separate_processes_send_each_event_once(shell_target, hook):
    root = shell_target
    seed(root, "#cloud-config\nruncmd: ['true']\n",
         system=f"reporting: {{h: {{type: webhook, endpoint: '{hook.url}'}}}}\n")
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    for argv in (["init", "--local"], ["init"], ["modules", "--mode", "config"], ["modules", "--mode", "final"]):
        done = subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, *argv], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-1000:]
    names = [(b["event_type"], b["name"]) for _, b in hook.received if "/" not in b["name"]]
    assert names == [(kind, stage) for stage in ("init-local", "init-network", "modules-config", "modules-final")
                     for kind in ("start", "finish")]
