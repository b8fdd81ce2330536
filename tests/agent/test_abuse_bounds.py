"""The agent under hostile or unusual input, second review: the bounds that still leaked, replayed.

Each test is one finding of the adversarial re-run: alias bombs reaching the agent through the
documents that bypassed the bounded YAML loader (lxd preseed, Hetzner and MAAS metadata, WSL's
agent.yaml), six 60 MiB ``write_files`` entries, cloud-config values JSON cannot hold, output sent
to cloud-init's log paths. Bombs are small on the wire and must be stopped early, not survived.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cloudseed.agent.boot.stages import Agent
from tests.agent.modules.module_support import run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = "/var/lib/cloud/seed/nocloud"
MIB = 1024 * 1024

# ten levels of ten: 10**10 nodes once expanded, a few hundred bytes written
BOMB_LINES = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(9))


def _indented(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" for line in text.splitlines())


def _seed_and_boot(root, user_data: str | bytes, modules: str, system: str = "") -> dict:
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", "network: {config: disabled}\n" + modules + system)
    root.write(f"{SEED}/meta-data", "instance-id: iid-abuse\n")
    root.write(f"{SEED}/user-data", user_data)
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    Agent(root).run_all()
    return json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]


def _serve(documents: dict[str, bytes]):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = documents.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ------------------------------------------------------------------ alias bombs past the shared loader
def test_alias_bomb_in_lxd_preseed_is_refused_by_the_module(target):
    """465 bytes of user-data made the final stage run 25 s and reach 2.5 GB before MemoryError."""
    result, _ = run(target, "lxd", {"lxd": {"preseed": BOMB_LINES}}, stage="config")
    assert result.status == "failed"
    assert "lxd.preseed: not YAML" in result.reason and "alias bomb" in result.reason


def test_alias_bomb_in_hetzner_metadata_is_a_datasource_error(target):
    from cloudseed.agent.datasources import DatasourceContext, find_datasource
    from cloudseed.agent.state import Paths

    metadata = ("instance-id: 4711\nhostname: hz\nvendor_data:\n" + _indented(BOMB_LINES, 2)).encode()
    server = _serve({"/metadata": metadata, "/userdata": b""})
    base = f"http://127.0.0.1:{server.server_address[1]}"
    cfg = {"datasource": {"Hetzner": {"metadata_url": f"{base}/metadata", "userdata_url": f"{base}/userdata",
                                      "retries": 0, "timeout": 5}}}
    try:
        search = find_datasource(DatasourceContext(root=target, cfg=cfg, cmdline="", paths=Paths(target),
                                                   stage="network"), ["Hetzner"])
    finally:
        server.shutdown()
    assert search.datasource is None
    assert any("Hetzner" in e and "alias bomb" in e for e in search.errors), search.errors


def test_alias_bomb_in_maas_vendor_data_names_the_file(target):
    from cloudseed.agent.datasources.maas import MAASError, read_seed_dir

    seed = {"meta-data/instance-id": "node-1", "meta-data/local-hostname": "n1", "user-data": "#cloud-config\n{}\n",
            "meta-data/vendor-data": BOMB_LINES}
    for path, text in seed.items():
        target.write(f"/var/lib/cloud/seed/maas/{path}", text)
    with pytest.raises(MAASError, match=r"meta-data/vendor-data: not YAML \(aliases expand .*alias bomb"):
        read_seed_dir(target.path("/var/lib/cloud/seed/maas"), "/var/lib/cloud/seed/maas")


def test_alias_bomb_in_wsl_agent_yaml_stays_a_refused_part(target):
    from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
    from cloudseed.agent.state import Paths
    from cloudseed.agent.userdata import process_userdata

    home = "/mnt/c/Users/alice"
    target.write("/proc/sys/kernel/osrelease", "5.15.153.1-microsoft-standard-WSL2\n")
    target.write("/proc/mounts", "none / ext4 rw 0 0\nC:\\134 /mnt/c 9p rw,aname=drvfs;path=C:\\ 0 0\n")
    target.write("/etc/os-release", 'ID=ubuntu\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n')
    for name in ("Public", "Default"):
        target.makedirs(f"/mnt/c/Users/{name}")
    target.write(f"{home}/.cloud-init/default.user-data", "#cloud-config\nlocale: C.UTF-8\n")
    target.write(f"{home}/.ubuntupro/.cloud-init/agent.yaml", "#cloud-config\n" + BOMB_LINES)
    ctx = DatasourceContext(root=target, cfg={"datasource": {"WSL": {"instance_name": "Dev-Box"}}}, cmdline="",
                            paths=Paths(target), stage=LOCAL)
    ds = find_datasource(ctx, ["WSL"]).datasource
    assert ds is not None
    processed = process_userdata(ds.userdata_raw)
    assert any("alias bomb" in e for e in processed.errors), processed.errors


# ------------------------------------------------------------------ write_files: one boot's total
def _zeros_entry(path: str, size: int, defer: bool = False) -> str:
    blob = base64.b64encode(gzip.compress(bytes(size), 9)).decode()
    return f"  - {{path: {path}, encoding: gz+b64, defer: {str(defer).lower()}, content: {blob}}}\n"


def test_six_60_mib_entries_stop_at_the_total_cap_naming_the_entries(target):
    """Six 60 MiB entries (small on the wire) wrote 377 MB; one boot's write_files now stops at 256 MiB."""
    user_data = "#cloud-config\nwrite_files:\n" + "".join(_zeros_entry(f"/srv/big{i}", 60 * MIB) for i in range(6))
    assert len(user_data) < 2 * MIB
    v1 = _seed_and_boot(target, user_data, "cloud_init_modules: [write_files]\ncloud_config_modules: []\n"
                                           "cloud_final_modules: [write_files_deferred]\n")
    written = [i for i in range(6) if target.exists(f"/srv/big{i}")]
    assert written == [0, 1, 2, 3]
    assert sum(os.path.getsize(target.path(f"/srv/big{i}")) for i in written) == 240 * MIB
    errors = " ".join(v1["init"]["errors"])
    for i in (4, 5):
        assert (f"write_files[{i}] (/srv/big{i}): its 60 MiB would take this boot's write_files past 256 MiB "
                "(240 MiB written before it") in errors, errors


def test_the_cap_counts_both_stages_and_user_data_cannot_raise_it(target):
    user_data = ("#cloud-config\nwrite_files_max_total: 10G\nwrite_files:\n" + _zeros_entry("/srv/a", 3 * MIB)
                 + _zeros_entry("/srv/late", 2 * MIB, defer=True) + _zeros_entry("/srv/b", 1 * MIB)
                 + "  - {path: /srv/small, content: fits, defer: true}\n")
    v1 = _seed_and_boot(target, user_data, "cloud_init_modules: [write_files]\ncloud_config_modules: []\n"
                                           "cloud_final_modules: [write_files_deferred]\n",
                        system="write_files_max_total: 5M\n")
    assert target.exists("/srv/a") and target.exists("/srv/b") and target.read_text("/srv/small") == "fits"
    assert not target.exists("/srv/late")           # 4 MiB written in the network stage; 2 more do not fit
    assert "write_files[1] (/srv/late): its 2 MiB would take this boot's write_files past 5 MiB" in \
        " ".join(v1["modules-final"]["errors"])
    assert any("write_files_max_total: only the image's configuration sets it" in w
               for w in v1["init"]["warnings"]), v1["init"]["warnings"]


# ------------------------------------------------------------------ values JSON cannot hold
def test_binary_dates_sets_and_integer_keys_flow_through_all_four_stages(target):
    """cloud-init's own documented ``!!binary`` example made the network stage fail with TypeError
    while writing user-data.processed.json: nothing of that user-data was applied."""
    user_data = ("#cloud-config\n"
                 "write_files:\n"
                 "  - path: /etc/from-binary\n"
                 "    content: !!binary |\n"
                 "      " + base64.b64encode(b"\x00\x01binary\xff").decode() + "\n"
                 "  - {path: /etc/plain, content: text}\n"
                 "final_message: done\n"
                 "x_when: 2024-05-06\n"
                 "x_stamp: 2024-05-06T07:08:09Z\n"
                 "x_set: !!set {a, b}\n"
                 "x_keys: {1: one, 2024-01-01: day, null: none, false: off, b: bee}\n")
    v1 = _seed_and_boot(target, user_data, "cloud_init_modules: [write_files]\ncloud_config_modules: []\n"
                                           "cloud_final_modules: [final_message]\n")
    assert not v1.get("crashed"), v1.get("crashed")
    for stage in ("init-local", "init", "modules-config", "modules-final"):
        assert v1[stage]["errors"] == [], (stage, v1[stage]["errors"])
    assert target.read_bytes("/etc/from-binary") == b"\x00\x01binary\xff"
    assert target.read_text("/etc/plain") == "text"
    sensitive = json.loads(target.read_text("/run/cloudseed/instance-data-sensitive.json"))
    merged = sensitive["merged_cfg"]
    assert merged["write_files"][0]["content"] == "ci-b64:" + base64.b64encode(b"\x00\x01binary\xff").decode()
    assert merged["x_when"] == "2024-05-06" and merged["x_stamp"].startswith("2024-05-06T07:08:09")
    assert merged["x_set"] == ["a", "b"]
    assert merged["x_keys"] == {"1": "one", "2024-01-01": "day", "null": "none", "false": False, "b": "bee"}
    processed = json.loads(target.read_text("/var/lib/cloudseed/instance/user-data.processed.json"))
    assert processed["cloud_config"]["write_files"][1] == {"path": "/etc/plain", "content": "text"}


# ------------------------------------------------------------------ output to cloud-init's log paths
def _boot_by_command(root, user_data: str) -> subprocess.CompletedProcess:
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg",
               "network: {config: disabled}\ncloud_init_modules: []\ncloud_config_modules: []\n"
               "cloud_final_modules: [final_message]\n")
    root.write(f"{SEED}/meta-data", "instance-id: iid-output\n")
    root.write(f"{SEED}/user-data", user_data)
    return subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, "boot"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_output_appended_to_cloud_init_output_log_lands_in_ours(target):
    """``>> /var/log/cloud-init-output.log`` (real cloud-configs use it) is our compatibility link: it
    was refused as a link ("Too many levels of symbolic links"), the boot degraded, the output lost."""
    proc = _boot_by_command(target, '#cloud-config\noutput: {all: ">> /var/log/cloud-init-output.log"}\n'
                                    "final_message: the final word\n")
    assert proc.returncode == 0, proc.stderr
    v1 = json.loads(target.read_text("/run/cloudseed/status.json"))["v1"]
    assert not any("output" in w for stage in ("modules-config", "modules-final") for w in v1[stage]["warnings"])
    assert os.readlink(target.path_nofollow("/var/log/cloud-init-output.log")) == "/var/log/cloudseed-output.log"
    assert "the final word" in target.read_text("/var/log/cloudseed-output.log")


def test_output_through_any_other_link_is_still_refused(target):
    target.write("/etc/secret", "keep\n", mode=0o600)
    target.makedirs("/var/log")
    os.symlink("/etc/secret", target.path_nofollow("/var/log/app.log"))
    proc = _boot_by_command(target, '#cloud-config\noutput: {all: ">> /var/log/app.log"}\n')
    assert proc.returncode == 0, proc.stderr
    v1 = json.loads(target.read_text("/run/cloudseed/status.json"))["v1"]
    assert "output: cannot send stdout to '>> /var/log/app.log': it is a symbolic link" in \
        " ".join(v1["modules-final"]["warnings"])
    assert target.read_text("/etc/secret") == "keep\n"
