"""Rolling upgrade behind haproxy: a registry at the previous schema version, served by servers of
the previous release, upgraded one server at a time while instances boot; no request fails.

The previous release is this repository's own history: the tree just before the commit that
raised ``SCHEMA_VERSION`` to what it is now (``git archive`` of it at test time). Two of its
servers create the registry and serve; a new server starts beside them and migrates the schema
while they go on serving (and an operator change made through an old one after the migration
reaches the new one); then each old server is stopped (SIGTERM: it finishes what it has) and
started again from the new code. Instances boot through the balancer the whole time, each
request allowed one try (bench/server_storm_client.c without retries).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from cloudseed.provider.registry.sql import SCHEMA_VERSION
from tests.provider.server.multi_host import METADATA, Deployment, request, storm_address
from tests.provider.server.server_support import PYTHON, ROOT

pytestmark = [pytest.mark.root]
SQL = "cloudseed/provider/registry/sql.py"
WAVES, WAVE_SIZE, WAVE_EVERY = 20, 12, 0.5
NEW_SERVER, REPLACE_1, REPLACE_2 = 1.0, 4.0, 7.0
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUpgrade guest@example"


def schema_version_in(commit: str) -> int:
    text = subprocess.run(["git", "-C", ROOT, "show", f"{commit}:{SQL}"], capture_output=True, text=True).stdout
    found = re.search(r"^SCHEMA_VERSION = (\d+)", text, re.M)
    return int(found.group(1)) if found else 1  # the first release kept no version


def previous_release(tmp: str) -> tuple[str, str, int]:
    """(tree, commit, schema version) of the code just before SCHEMA_VERSION last changed."""
    commits = subprocess.run(["git", "-C", ROOT, "rev-list", "HEAD", "--", SQL], capture_output=True,
                             text=True).stdout.split()
    bump = None
    for commit in commits:
        if schema_version_in(commit) != SCHEMA_VERSION:
            break
        bump = commit
    else:
        pytest.skip("the git history here does not reach the previous schema version (a shallow clone? "
                    "git fetch --unshallow)")
    old = subprocess.run(["git", "-C", ROOT, "rev-parse", f"{bump}^"], capture_output=True, text=True,
                         check=True).stdout.strip()
    tree = os.path.join(tmp, "previous-release")
    os.makedirs(tree)
    archive = subprocess.Popen(["git", "-C", ROOT, "archive", old, "cloudseed"], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", tree], stdin=archive.stdout, check=True)
    assert archive.wait() == 0
    return tree, old, schema_version_in(old)


def until(start_at: float, mark: float) -> None:
    delay = start_at + mark - time.time()
    if delay > 0:
        time.sleep(delay)


def test_rolling_upgrade_while_instances_boot(tmp_path):
    from bench import server_bench, server_storm

    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tree, commit, old_version = previous_release(str(tmp_path))
    assert old_version < SCHEMA_VERSION
    cloud = Deployment(str(tmp_path / "cloud"))
    try:
        for n in (1, 2):
            cloud.start_server(n, tree=tree, wait=False)
        cloud.wait_states({"s1": "UP", "s2": "UP"})
        count = WAVES * WAVE_SIZE
        records = [{"instance_id": f"i-up-{n:04d}", "hostname": f"up-{n}", "macs": [server_bench.MAC],
                    "addresses": [{"address": storm_address(n), "network": "default"}],
                    "ssh_keys": [{"name": "k", "data": KEY}], "user_data": "#cloud-config\n"} for n in range(count)]
        register = ("import json, sys\nfrom cloudseed.provider.registry import InstanceRecord, open_registry\n"
                    "registry = open_registry(sys.argv[1])\n"
                    "registry.add_many([InstanceRecord.from_dict(r) for r in json.load(sys.stdin)])\n"
                    "print(registry.schema_version())\nregistry.close()\n")
        added = subprocess.run([PYTHON, "-c", register, cloud.url], input=json.dumps(records), capture_output=True,
                               text=True, cwd=tree, env=dict(os.environ, PYTHONPATH=tree), timeout=120)
        assert added.returncode == 0 and added.stdout.strip() == str(old_version), added.stderr
        sequence = [(m, p, p.endswith(("meta_data.json", "instance-id"))) for m, p in server_bench.OPENSTACK_BOOT]
        start_at = time.time() + 1.0
        results: dict = {}

        def storm() -> None:
            results["storm"] = server_storm.boot_storm_c(
                80, [storm_address(n) for n in range(count)], sequence, False, str(tmp_path / "storm"),
                destination=METADATA, expect=[f"i-up-{n:04d}" for n in range(count)],
                offsets=[(n // WAVE_SIZE) * WAVE_EVERY for n in range(count)], netns=cloud.ns("gS").name,
                start_at=start_at)

        os.makedirs(tmp_path / "storm")
        booting = threading.Thread(target=storm)
        booting.start()
        old_servers = {n: cloud.servers[n] for n in (1, 2)}
        try:
            until(start_at, NEW_SERVER)
            cloud.start_server(3, wait=False)  # the new release: migrates the schema on start
            migrated = time.time()
            cloud.wait_states({"s3": "UP"})
            # side by side: a change made through an old server reaches the new one
            reply = cloud.admin(2, "PATCH", "/v1/instances/i-up-0001", {"hostname": "changed-by-old"})
            assert reply.status == 200, reply.text
            changed = time.monotonic()
            while cloud.direct(3, storm_address(1), request("GET", "/latest/meta-data/hostname")).text != \
                    "changed-by-old":
                assert time.monotonic() - changed < 1.0
            for n, mark in ((1, REPLACE_1), (2, REPLACE_2)):
                until(start_at, mark)
                cloud.kill_server(n, signal.SIGTERM)
                cloud.start_server(n, wait=False)
        finally:
            booting.join()
        cloud.wait_states({"s1": "UP", "s2": "UP", "s3": "UP"})
        result = results["storm"]
        assert result["wrong"] == 0 and result["failures"] == 0 and not result["fails"], result["fails"][:5]
        assert all(boot[1] is not None for boot in result["boots"])
        from cloudseed.provider.registry import open_registry

        registry = open_registry(cloud.url)
        try:
            assert registry.schema_version() == SCHEMA_VERSION
            assert registry.get("i-up-0001").hostname == "changed-by-old"
        finally:
            registry.close()
        served_after = 0  # requests the old servers answered once the schema was the new one
        for proc in old_servers.values():
            with open(proc.access_log) as handle:
                served_after += sum(1 for line in handle if json.loads(line)["ts"] > migrated + 0.5)
        assert served_after > 0
        print(f"rolling upgrade from {commit[:10]} (schema {old_version}) to schema {SCHEMA_VERSION}: {count} "
              f"instances x {len(sequence)} requests, 0 failed; old servers answered {served_after} requests "
              f"after the migration")
    finally:
        cloud.close()
