"""Where ``type: cloudseed`` reports without an ``endpoint``: the host of the service the datasource used.

Each kind against a real ``cloudseed serve`` on loopback (the instance known by 127.0.0.1): an
OpenStack metadata service found by the network stage (each stage in a process of its own, as the
units run them when the boot's process is gone: the local stage's events wait for the datasource
and arrive once), a NoCloud ``seedfrom`` URL, and a local seed directory, which has no such host:
nothing is sent and the status says why. What each datasource says it was read from
(``service_url``, from the ``subplatform`` the cache keeps) is checked per shape, Azure's IMDS too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from cloudseed.agent.boot.stages import Agent

MODULES = """\
network: {config: disabled}
cloud_init_modules: []
cloud_config_modules: [runcmd]
cloud_final_modules: [scripts_user]
reporting: {platform: {type: cloudseed}}
"""
FAILING = "#cloud-config\nruncmd: ['exit 4']\n"
STAGES = ("init-local", "init-network", "modules-config", "modules-final")


@pytest.fixture
def server(tmp_path):
    from tests.provider.server.server_support import ServerProcess

    process = ServerProcess(str(tmp_path / "db.sqlite"), str(tmp_path / "srv"), ["127.0.0.1:0"])
    process.add(instance_id="iid-endpoint", addresses=["127.0.0.1"], user_data=FAILING)
    yield process
    process.stop()


def _reports(server) -> tuple[dict, list[tuple[str, str]]]:
    shown = server.admin("GET", "/v1/instances/iid-endpoint/provisioning").json()
    return shown["provisioning"], [(r["event_type"], r["name"]) for r in shown["reports"] if "/" not in r["name"]]


def _run_all(root) -> int:
    shutil.rmtree(root.path("/run"), ignore_errors=True)
    agent = Agent(root)
    code = agent.run_all()
    agent.state.reporter.close()  # what the process's exit does
    return code


def test_openstack_metadata_service_host_gets_the_events_stages_in_separate_processes(target, server):
    target.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", MODULES + (
        "datasource_list: [OpenStack]\n"
        f"datasource: {{OpenStack: {{metadata_urls: ['http://127.0.0.1:{server.port}'], max_wait: 10}}}}\n"))
    for argv in (["init", "--local"], ["init"], ["modules", "--mode", "config"], ["modules", "--mode", "final"]):
        subprocess.run([sys.executable, "-m", "cloudseed", "--root", target.top, *argv], capture_output=True,
                       text=True, timeout=120)
    state, stages = _reports(server)
    assert state["state"] == "failed" and state["datasource"] == "OpenStack", state
    assert state["failure"]["name"] == "modules-final/config-scripts_user"
    # the local stage found nothing; its events waited for the network stage's datasource, once each
    assert stages == [(kind, stage) for stage in STAGES for kind in ("start", "finish")], stages


def test_nocloud_seedfrom_url_host_gets_the_events(target, server):
    target.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", MODULES + "datasource_list: [NoCloud]\n")
    target.write("/etc/cloudseed/cmdline", f"quiet ds=nocloud;s=http://127.0.0.1:{server.port}/nocloud/\n")
    assert _run_all(target) == 1
    state, stages = _reports(server)
    assert state["state"] == "failed" and state["datasource"] == "NoCloud", state
    assert [s for k, s in stages if k == "finish"] == list(STAGES)


def test_a_local_seed_has_no_metadata_server_nothing_is_sent_and_the_status_says_so(target, server):
    target.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", MODULES + "datasource_list: [NoCloud]\n")
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-endpoint\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data", FAILING)
    assert _run_all(target) == 1
    status = json.loads(target.read_text("/run/cloudseed/status.json"))["v1"]
    notes = [w for w in status["init"]["warnings"] if w.startswith("reporting.platform: no endpoint")]
    assert notes == ["reporting.platform: no endpoint: the datasource NoCloud read this instance from "
                     "seed-dir (/var/lib/cloud/seed/nocloud), not a metadata service; events are not sent "
                     "(set reporting.platform.endpoint)"], status["init"]["warnings"]
    state, stages = _reports(server)
    assert stages == [] and state["state"] == "pending", state  # nothing went to the server it could have guessed


@pytest.mark.parametrize(("name", "subplatform", "settings", "expected"), [
    ("Ec2", "metadata (http://169.254.169.254)", {}, "http://169.254.169.254/cloudseed/v1/events"),
    ("Ec2", "metadata (http://[fd00:ec2::254])", {}, "http://[fd00:ec2::254]/cloudseed/v1/events"),
    ("OpenStack", "metadata (https://meta.example:8775/openstack)", {}, "https://meta.example:8775/cloudseed/v1/events"),
    ("GCE", "metadata (http://metadata.google.internal/computeMetadata/v1/)", {},
     "http://metadata.google.internal/cloudseed/v1/events"),
    ("NoCloud", "seed-dir (cmdline,http://10.0.0.2:8000/nocloud/)", {}, "http://10.0.0.2:8000/cloudseed/v1/events"),
    ("NoCloud", "seed-dir (cmdline,ftp://10.0.0.2/seed/)", {}, None),
    ("NoCloud", "config-disk (/dev/sr0)", {}, None),
    ("ConfigDrive", "config-disk (/dev/vdb)", {}, None),
    ("LXD", "LXD socket API v. 1.0 (/dev/lxd/sock)", {}, None),
    ("Azure", "config-disk (/dev/sr0) + IMDS", {}, "http://169.254.169.254/cloudseed/v1/events"),
    ("Azure", "IMDS", {"imds_url": "http://10.9.0.1:8080/metadata/instance"}, "http://10.9.0.1:8080/cloudseed/v1/events"),
    ("Azure", "config-disk (/dev/sr0)", {}, None),
])
def test_each_datasource_kind_names_its_endpoint(target, name, subplatform, settings, expected):
    from cloudseed.agent.datasources import DatasourceContext, datasource_class
    from cloudseed.agent.reporting.cloudseed import endpoint_for
    from cloudseed.agent.state import Paths

    ctx = DatasourceContext(target, {"datasource": {name: settings}}, "", Paths(target), "network")
    ds = datasource_class(name)(ctx)
    ds.subplatform = subplatform
    assert endpoint_for(ds) == expected
