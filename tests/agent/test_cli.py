"""The commands people script against: status, query, schema, clean, single, analyze, install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.agent.boot_support import CORE_MODULES, boot, seed

CLOUDSEED = [sys.executable, "-m", "cloudseed"]


def cli(*args: str, root=None, timeout: float = 30, input: str | None = None) -> subprocess.CompletedProcess:
    prefix = ["--root", root.top] if root is not None else []
    return subprocess.run([*CLOUDSEED, *prefix, *args], capture_output=True, text=True, timeout=timeout,
                          input=input)


def test_version():
    from cloudseed import __version__

    assert cli("--version").stdout.strip() == f"cloudseed {__version__}"


def test_status_exit_codes_follow_the_boot(shell_target):
    root = shell_target
    assert cli("status", root=root).stdout.startswith("status: not started")
    seed(root, "instance-id: iid-st\n", user="#cloud-config\nruncmd: [echo ok]\n")
    boot(root)
    done = cli("status", "--format", "json", root=root)
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "done"
    seed(root, "instance-id: iid-st2\n", user="#cloud-config\nruncmd: [exit 1]\n")
    boot(root)
    failed = cli("status", "--long", root=root)
    assert failed.returncode == 1
    assert "status: error" in failed.stdout and "scripts_user" in failed.stdout
    seed(root, "instance-id: iid-st3\n", user="#cloud-config\nruncmd: [echo ok]\nnot_a_key: 1\n")
    boot(root)
    degraded = cli("status", "--format", "yaml", "--long", root=root)
    assert degraded.returncode == 2  # cloud-init 23.4+'s rule, the default
    assert "extended_status: degraded done" in degraded.stdout and "not_a_key" in degraded.stdout
    assert "\nstatus: done\n" in degraded.stdout  # cloud-init's word; the condition is in extended_status
    root.write("/etc/cloudseed/cloud.cfg.d/90-exit.cfg", 'status_exit_codes: "22.4"\n')
    assert cli("status", root=root).returncode == 0  # 22.4's rule: done with warnings is done


def test_status_wait_returns_at_once_when_disabled_or_not_enabled(target):
    started = time.monotonic()
    assert cli("status", "--wait", root=target).returncode == 0  # nothing set to run
    target.write("/etc/cloudseed/disabled", "")
    result = cli("status", "--wait", root=target)
    assert result.returncode == 0 and "status: disabled" in result.stdout
    assert time.monotonic() - started < 20


def test_status_wait_follows_a_running_boot(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-wait\n", user="#cloud-config\nruncmd: [sleep 2]\n")
    root.write("/run/cloudseed/enabled", "{}")
    waiter = subprocess.Popen([*CLOUDSEED, "--root", root.top, "status", "--wait", "--format", "json"],
                              stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert waiter.poll() is None  # still waiting: the boot has not started
    Agent_run = subprocess.run([*CLOUDSEED, "--root", root.top, "boot"], capture_output=True, timeout=60)
    assert Agent_run.returncode == 0
    out, _ = waiter.communicate(timeout=20)
    assert json.loads(out)["status"] == "done"


def test_query_standard_keys_and_aliases(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-q\nlocal-hostname: qhost\n")
    boot(root)
    assert cli("query", "v1.instance_id", root=root).stdout.strip() == "iid-q"
    assert cli("query", "instance_id", root=root).stdout.strip() == "iid-q"
    assert cli("query", "v1.local-hostname", root=root).stdout.strip() == "qhost"
    assert cli("query", "local_hostname", root=root).stdout.strip() == "qhost"
    # NoCloud without a cloud-name in its meta-data: "unknown", as cloud-init says; cloud_id is the platform
    assert cli("query", "cloud_name", root=root).stdout.strip() == "unknown"
    assert cli("query", "cloud_id", root=root).stdout.strip() == "nocloud"
    keys = cli("query", "--list-keys", "v1", root=root).stdout.split()
    assert {"instance_id", "region", "availability_zone", "cloud_name", "platform"} <= set(keys)
    assert cli("query", "--format", "id={{ v1.instance_id }} host={{local_hostname}}", root=root).stdout.strip() \
        == "id=iid-q host=qhost"
    missing = cli("query", "v1.nope", root=root)
    assert missing.returncode == 1 and "no key 'v1.nope'" in missing.stdout
    everything = json.loads(cli("query", "--all", root=root).stdout)
    assert everything["ds"]["meta_data"]["local-hostname"] == "qhost"


def test_schema_valid_file(tmp_path):
    f = tmp_path / "ok.yaml"
    f.write_text("#cloud-config\nruncmd:\n  - echo hi\nwrite_files:\n  - path: /x\n    content: y\n")
    result = cli("schema", "--config-file", str(f))
    assert result.returncode == 0 and "valid" in result.stdout


def test_schema_errors_name_key_path_and_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("#cloud-config\nruncmd:\n  - echo hi\nwrite_files:\n  - path: /x\n    permissions: [1]\n"
                 "    encodng: b64\nbootcmd: 5\nruncmdd: []\n")
    result = cli("schema", "--config-file", str(f))
    assert result.returncode == 1
    out = result.stdout
    assert f"{f}:8: error: bootcmd: expected array, got integer 5" in out
    assert "write_files[0].permissions" in out and ":6:" in out
    assert "write_files[0].encodng: unknown key (did you mean 'encoding'?)" in out
    # an unknown top-level key is an error, as in cloud-init 24.x+ (22.4 let it pass)
    assert "error: runcmdd: unknown key (did you mean 'runcmd'?)" in out


def test_schema_requires_the_cloud_config_header_and_valid_yaml(tmp_path):
    f = tmp_path / "nohead.yaml"
    f.write_text("runcmd: []\n")
    assert "first line must be '#cloud-config'" in cli("schema", "-c", str(f)).stdout
    g = tmp_path / "broken.yaml"
    g.write_text("#cloud-config\nruncmd: [\n")
    result = cli("schema", "-c", str(g))
    assert result.returncode == 1 and "invalid YAML" in result.stdout


def test_schema_annotate_puts_problems_beside_lines(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("#cloud-config\nbootcmd: 5\n")
    out = cli("schema", "-c", str(f), "--annotate").stdout
    assert "bootcmd: 5\t\t# ERROR: bootcmd: expected array" in out


def test_clean_makes_the_next_boot_a_first_boot(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-clean\n")
    boot(root)
    assert cli("clean", "--logs", root=root).returncode == 0
    assert not root.exists("/var/lib/cloudseed/instance")
    assert not root.exists("/var/log/cloudseed.log")
    assert root.exists("/var/lib/cloud/seed/nocloud/meta-data")  # not ours to remove
    boot(root)
    assert root.read_text("/var/tmp/runcmd.log").split() == ["run", "run"]


def test_single_runs_one_module_with_a_frequency_override(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-single\n")
    boot(root)
    first = cli("single", "--name", "write-files", root=root)
    assert "already ran" in first.stderr
    root.remove("/etc/demo/app.conf")
    again = cli("single", "--name", "write_files", "--frequency", "always", root=root)
    assert again.returncode == 0 and root.exists("/etc/demo/app.conf")
    assert "unknown frequency" in cli("single", "--name", "runcmd", "--frequency", "weekly", root=root).stdout
    # a name no module has exits 1 (cloud-init: "Did not run X, does it exist?"), with a did-you-mean
    typo = cli("single", "--name", "write_file", root=root)
    assert typo.returncode == 1 and "no module named 'write_file' (did you mean 'write_files'?)" in typo.stderr
    assert cli("single", "--name", "no_such_thing", root=root).returncode == 1


def test_analyze_blame_lists_modules_by_time(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-an\n")
    boot(root)
    out = cli("analyze", "blame", root=root).stdout
    assert "network/write_files" in out and "final/scripts_user" in out


def test_install_puts_units_and_generator_into_a_root(target):
    result = cli("install", root=target)
    assert result.returncode == 0
    unit = target.read_text("/usr/lib/systemd/system/cloudseed-local.service")
    assert "Before=network-pre.target" in unit and "ExecStart=/usr/bin/cloudseed boot --hand-off" in unit
    network = target.read_text("/usr/lib/systemd/system/cloudseed-network.service")
    assert "Before=network-online.target" in network
    assert "ExecStart=/usr/lib/cloudseed/cloudseed-stage network" in network
    assert os.access(target.path("/usr/lib/cloudseed/cloudseed-stage"), os.X_OK)
    for text in (unit, network):  # neither stage holds back sysinit.target (issue 18)
        assert not [line for line in text.splitlines() if line.startswith("Before=") and "sysinit.target" in line]
    assert "After=network-online.target" in target.read_text("/usr/lib/systemd/system/cloudseed-config.service")
    assert "multi-user.target" in target.read_text("/usr/lib/systemd/system/cloudseed-final.service")
    generator = target.path("/usr/lib/systemd/system-generators/cloudseed-generator")
    assert os.access(generator, os.X_OK)


def test_install_with_package_caches_the_module_schema_until_a_module_changes(target):
    result = cli("install", "--with-package", "--no-compile", root=target)
    assert result.returncode == 0, result.stderr
    from cloudseed.agent.config import schema

    installed = target.path("/usr/lib/python3/dist-packages/cloudseed")
    cached = json.loads(target.read_text("/usr/lib/python3/dist-packages/cloudseed/data/module-schema.json"))
    assert cached["schema"] == schema.build_module_schema()
    assert schema._cached_module_schema(installed) == cached["schema"]
    assert "users" in cached["schema"]["properties"] and "runcmd" in cached["schema"]["properties"]
    # a module edited after the install: the stamp no longer matches and the cache is not used
    module = os.path.join(installed, "agent", "modules", "runcmd.py")
    os.utime(module, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert schema._cached_module_schema(installed) is None


def test_units_pass_systemd_analyze_verify(target, tmp_path):
    import shutil

    if shutil.which("systemd-analyze") is None:
        import pytest

        pytest.skip("systemd-analyze is not installed")
    cli("install", root=target)
    unit_dir = target.path("/usr/lib/systemd/system")
    result = subprocess.run(["systemd-analyze", "verify", "--man=no",
                             *[os.path.join(unit_dir, u) for u in sorted(os.listdir(unit_dir))]],
                            capture_output=True, text=True, env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"})
    own = [line for line in result.stderr.splitlines() if "cloudseed" in line and "/usr/bin/cloudseed" not in line
           and "Command" not in line]
    assert own == [], result.stderr


def test_config_order_cloud_then_cloudseed_then_cmdline(target):
    from cloudseed.agent.config import load_system_config

    target.write("/etc/cloud/cloud.cfg", "a: cloud\nb: cloud\nc: cloud\nd: {x: 1, y: 1}\n")
    target.write("/etc/cloud/cloud.cfg.d/10-x.cfg", "b: cloud.d\nd: {y: 2}\n")
    target.write("/etc/cloudseed/cloud.cfg", "c: cloudseed\n")
    target.write("/etc/cloudseed/cloud.cfg.d/10-x.cfg", "e: cloudseed.d\n")
    cfg = load_system_config(target, "ro cc: e: cmdline\\nf: [1, 2] end_cc quiet")
    assert (cfg["a"], cfg["b"], cfg["c"], cfg["e"], cfg["f"]) == ("cloud", "cloud.d", "cloudseed", "cmdline", [1, 2])
    assert cfg["d"] == {"x": 1, "y": 2}
    assert cfg["datasource_list"][0] == "NoCloud"  # built-in default kept


def test_core_module_list_in_test_roots_is_the_cores():
    assert "write_files" in CORE_MODULES


def test_schema_renders_a_jinja_file_with_instance_data_first(tmp_path):
    data = tmp_path / "instance-data.json"
    data.write_text('{"v1": {"local_hostname": "web-1", "instance_id": "i-42"}}')
    f = tmp_path / "tpl.yaml"
    f.write_text("## template: jinja\n#cloud-config\nhostname: {{ v1.local_hostname }}\n"
                 "runcmd: {{ v1.instance_id }}\n")
    result = cli("schema", "-c", str(f), "--instance-data", str(data))
    assert result.returncode == 1
    # checked after rendering: the value is the instance's, the line the file's
    assert f"{f}:4: error: runcmd: expected array, got string 'i-42'" in result.stdout
    annotated = cli("schema", "-c", str(f), "-i", str(data), "--annotate").stdout
    assert "hostname: web-1\n" in annotated and "runcmd: i-42\t\t# ERROR: runcmd: expected array" in annotated
    f.write_text("## template: jinja\n#cloud-config\nhostname: {{ v1.local_hostname }}\n")
    assert cli("schema", "-c", str(f), "-i", str(data)).returncode == 0
    missing = cli("schema", "-c", str(f), "-i", str(tmp_path / "none.json"))
    assert missing.returncode == 1 and "cannot read instance data" in missing.stdout
    # without -i, the system's instance data (here: a root without any) is used
    no_data = cli("--root", str(tmp_path), "schema", "-c", str(f))
    assert no_data.returncode == 1 and "no instance data on this system" in no_data.stdout


def test_debug_twice_logs_trace_messages(tmp_path):
    """cloud-init 24.x's TRACE level: each HTTP exchange of the agent, with status, size and time."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"instance-id: iid-trace\n" if self.path.endswith("meta-data") else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code = ("import logging, sys\nfrom cloudseed.core.root import TargetRoot\n"
                "from cloudseed.agent.state.log import setup_logging\nfrom cloudseed.core.http import fetch\n"
                "setup_logging(TargetRoot(sys.argv[1]), int(sys.argv[2]))\n"
                "fetch(sys.argv[3] + '/meta-data')\n")
        url = f"http://127.0.0.1:{server.server_address[1]}"
        outputs = [subprocess.run([sys.executable, "-c", code, str(tmp_path), str(level), url],
                                  capture_output=True, text=True, timeout=60) for level in (1, 2)]
    finally:
        server.shutdown()
        server.server_close()
    assert "TRACE" not in outputs[0].stderr
    assert f"TRACE: GET {url}/meta-data -> 200 (23 bytes" in outputs[1].stderr
    assert f"TRACE: GET {url}/meta-data -> 200" in (tmp_path / "var/log/cloudseed.log").read_text()


def test_help_names_verbs_as_typed_and_every_api_the_server_serves():
    import subprocess
    import sys

    from cloudseed.provider.server.routes import CLOUD_APIS

    top = subprocess.run([sys.executable, "-m", "cloudseed", "--help"], capture_output=True, text=True, timeout=60)
    assert "collect-logs" in top.stdout and "collect_logs" not in top.stdout
    serve = subprocess.run([sys.executable, "-m", "cloudseed", "serve", "--help"], capture_output=True, text=True,
                           timeout=60)
    words = " ".join(serve.stdout.split())
    for api in {"ec2", "openstack", "nocloud", *CLOUD_APIS}:
        assert api in words, api
