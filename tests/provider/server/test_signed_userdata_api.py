"""``PATH.sig`` beside the user-data on every metadata API, signed by the registry's key.

One route serves them all (``signature_api.py``): each API's user-data path with ``.sig`` gives
an SSH signature that OpenSSH (``ssh-keygen -Y verify``, through the agent's own check) accepts
for that instance only, with the registry's public key as ``cloudseed userdata key`` prints it.
The API's own rules still apply to the signature (IMDSv2 tokens, Metadata-Flavor...).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from server_support import ROOT, http, new_address

from cloudseed.core.userdata_signatures import SignatureError, verify

USER_DATA = "#cloud-config\nhostname: signed-everywhere\n"
# api (the record's clouds setting) -> (user-data path, headers that API wants)
APIS = {
    "ec2": ("/latest/user-data", {}),
    "openstack": ("/openstack/latest/user_data", {}),
    "nocloud": ("/nocloud/user-data", {}),
    "gce": ("/computeMetadata/v1/instance/attributes/user-data", {"Metadata-Flavor": "Google"}),
    "azure": ("/metadata/instance/compute/userData?api-version=2021-01-01&format=text", {"Metadata": "true"}),
    "oracle": ("/opc/v2/instance/metadata/user_data", {"Authorization": "Bearer Oracle"}),
    "hetzner": ("/hetzner/v1/userdata", {}),
    "digitalocean": ("/metadata/v1/user-data", {}),
    "upcloud": ("/metadata/v1/user_data", {}),
    "vultr": ("/v1/user-data", {}),
    "nwcs": ("/api/v1/metadata/userdata", {}),
    "cloudstack": ("/latest/user-data", {}),
    "exoscale": ("/latest/user-data", {}),
    "aliyun": ("/latest/user-data", {}),
    "cloudcix": ("/v1/userdata", {}),
}


def _sig_path(path: str) -> str:
    base, sep, query = path.partition("?")
    return base + ".sig" + sep + query


@pytest.fixture(scope="module")
def registry_key(server):
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "userdata", "key", "--db", server.db_url], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ssh-ed25519 ")
    return proc.stdout.strip()


def _register(server, api: str) -> tuple[str, str]:
    address = new_address()
    instance_id = f"i-sig-{api}-{address.replace('.', '-')}"
    clouds = {} if api in ("ec2", "openstack", "nocloud") else {api: {}}
    server.add(instance_id=instance_id, addresses=[{"address": address, "network": "default"}], user_data=USER_DATA,
               clouds=clouds)
    return instance_id, address


@pytest.mark.parametrize("api", list(APIS))
def test_every_api_serves_a_signature_openssh_accepts_for_this_instance_only(server, registry_key, api):
    path, headers = APIS[api]
    instance_id, address = _register(server, api)
    assert http(server.port, path, source=address, headers=headers).status == 200
    reply = http(server.port, _sig_path(path), source=address, headers=headers)
    assert reply.status == 200, reply.text
    signer = verify(USER_DATA.encode(), reply.body, "user-data", instance_id, [registry_key])
    assert signer.split()[:2] == registry_key.split()[:2]
    with pytest.raises(SignatureError):      # replayed to another instance, it does not verify
        verify(USER_DATA.encode(), reply.body, "user-data", instance_id + "-next", [registry_key])


def test_signatures_follow_the_apis_own_rules(server):
    instance_id, address = _register(server, "gce")
    assert http(server.port, _sig_path(APIS["gce"][0]), source=address).status == 403   # no Metadata-Flavor
    _, address = _register(server, "ec2")
    assert http(server.port, "/latest/meta-data/instance-id.sig", source=address).status == 404  # not user-data
    assert http(server.port, "/latest/user-data.sig", source=new_address()).status == 404     # no such instance
