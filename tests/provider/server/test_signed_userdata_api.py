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

from cloudseed.core.userdata_signatures import SignatureError, verify
from tests.provider.server.server_support import ROOT, http, new_address

USER_DATA = "#cloud-config\nhostname: signed-everywhere\n"
# api (the record's clouds setting) -> (user-data path, headers that API wants, where its guest reads the
# instance-id, which the signature covers: a text leaf, or "PATH#key" in a JSON or YAML document)
APIS = {
    "ec2": ("/latest/user-data", {}, "/latest/meta-data/instance-id"),
    "openstack": ("/openstack/latest/user_data", {}, "/openstack/latest/meta_data.json#uuid"),
    "nocloud": ("/nocloud/user-data", {}, "/nocloud/meta-data#instance-id"),
    "gce": ("/computeMetadata/v1/instance/attributes/user-data", {"Metadata-Flavor": "Google"},
            "/computeMetadata/v1/instance/id"),
    "azure": ("/metadata/instance/compute/userData?api-version=2021-01-01&format=text", {"Metadata": "true"},
              "/metadata/instance/compute/vmId?api-version=2021-01-01&format=text"),
    "oracle": ("/opc/v2/instance/metadata/user_data", {"Authorization": "Bearer Oracle"}, "/opc/v2/instance/id"),
    "hetzner": ("/hetzner/v1/userdata", {}, "/hetzner/v1/metadata/instance-id"),
    "digitalocean": ("/metadata/v1/user-data", {}, "/metadata/v1/id"),
    "upcloud": ("/metadata/v1/user_data", {}, "/metadata/v1/instance_id"),
    "vultr": ("/v1/user-data", {}, "/v1/instance-v2-id"),
    "nwcs": ("/api/v1/metadata/userdata", {}, "/api/v1/metadata/instance-id"),
    "cloudstack": ("/latest/user-data", {}, "/latest/meta-data/instance-id"),
    "exoscale": ("/latest/user-data", {}, "/latest/meta-data/instance-id"),
    "aliyun": ("/latest/user-data", {}, "/latest/meta-data/instance-id"),
    "cloudcix": ("/v1/userdata", {}, "/v1/metadata#instance_id"),
}


def _guest_instance_id(server, address: str, api: str) -> str:
    """The instance-id as this API's guest reads it (GCE's number, Azure's vmId...)."""
    import yaml

    path, headers, where = APIS[api]
    where, _, key = where.partition("#")
    reply = http(server.port, where, source=address, headers=headers)
    assert reply.status == 200, reply.text
    return str(yaml.safe_load(reply.text)[key]) if key else reply.text.strip()


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
    path, headers, _ = APIS[api]
    _, address = _register(server, api)
    assert http(server.port, path, source=address, headers=headers).status == 200
    reply = http(server.port, _sig_path(path), source=address, headers=headers)
    assert reply.status == 200, reply.text
    instance_id = _guest_instance_id(server, address, api)  # the id the guest reads there
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


def test_openstack_vendor_data_documents_are_signed_as_served_each_as_its_own_kind(server, registry_key):
    """vendor_data.json and vendor_data2.json: the JSON the guest unwraps, signed as it is served;
    one's signature does not pass for the other, nor for the vendor-data text inside it."""
    address = new_address()
    instance_id = f"i-sig-vd-{address.replace('.', '-')}"
    vendor, vendor2 = "#cloud-config\nruncmd: [one]\n", {"cloud-init": "#cloud-config\nruncmd: [two]\n"}
    server.add(instance_id=instance_id, addresses=[{"address": address, "network": "default"}],
               vendor_data=vendor, vendor_data2=vendor2)
    for name, kind, other in (("vendor_data.json", "vendor-data", "vendor-data2"),
                              ("vendor_data2.json", "vendor-data2", "vendor-data")):
        document = http(server.port, f"/openstack/latest/{name}", source=address)
        reply = http(server.port, f"/openstack/latest/{name}.sig", source=address)
        assert reply.status == 200, reply.text
        verify(document.body, reply.body, kind, instance_id, [registry_key])
        with pytest.raises(SignatureError):
            verify(document.body, reply.body, other, instance_id, [registry_key])
    with pytest.raises(SignatureError):  # the text inside is not what was signed
        verify(vendor.encode(), http(server.port, "/openstack/latest/vendor_data.json.sig", source=address).body,
               "vendor-data", instance_id, [registry_key])
    bare = new_address()  # no vendor data: its empty document is not signed
    server.add(instance_id=f"i-sig-novd-{bare.replace('.', '-')}", addresses=[{"address": bare, "network": "default"}])
    assert http(server.port, "/openstack/latest/vendor_data.json.sig", source=bare).status == 404


def test_vultr_vendor_data_listing_is_signed_as_the_text_the_guest_uses(server, registry_key):
    address = new_address()
    vendor = "#cloud-config\nruncmd: [vultr]\n"
    server.add(instance_id=f"i-sig-vultr-{address.replace('.', '-')}", addresses=[{"address": address,
                                                                                   "network": "default"}],
               vendor_data=vendor, clouds={"vultr": {}})
    listing = http(server.port, "/v1/vendor-data", source=address)
    assert listing.body == vendor.encode() + b"\n"  # one item of a listing
    reply = http(server.port, "/v1/vendor-data.sig", source=address)
    assert reply.status == 200, reply.text
    verify(vendor.encode(), reply.body, "vendor-data", _guest_instance_id(server, address, "vultr"), [registry_key])


CLI_CASES = (("gce", "user-data", APIS["gce"][0]), ("ec2", "user-data", APIS["ec2"][0]),
             ("openstack", "vendor-data", "/openstack/latest/vendor_data.json"),
             ("digitalocean", "vendor-data", "/metadata/v1/vendor-data"))


def _cli(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", server.db_url, "signature", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_instances_signature_prints_what_the_server_serves(server, registry_key, tmp_path):
    for n, (api, kind, path) in enumerate(CLI_CASES):
        address = new_address()
        instance_id = f"i-sig-cli-{address.replace('.', '-')}"
        server.add(instance_id=instance_id, addresses=[{"address": address, "network": "default"}],
                   user_data=USER_DATA, vendor_data="#cloud-config\nruncmd: [vendor]\n",
                   clouds={} if api in ("ec2", "openstack") else {api: {}})
        served = http(server.port, _sig_path(path), source=address, headers=APIS[api][1] if api in APIS else {})
        assert served.status == 200, served.text
        out = tmp_path / f"sig-{n}"
        args = [instance_id, "--api", api, "--kind", kind] + (["-o", str(out)] if n % 2 else [])
        printed = _cli(server, *args)
        assert printed.returncode == 0, printed.stderr
        got = out.read_bytes() if n % 2 else printed.stdout.encode()
        assert got == served.body, api  # the same bytes (Ed25519 is deterministic)
    key = _cli(server, "--public-key")
    assert key.returncode == 0 and key.stdout.strip() == registry_key


def test_instances_signature_says_what_is_missing(server):
    if server.db_url.startswith("postgresql"):
        pytest.skip("the command's messages do not depend on the registry's backend (run on SQLite)")
    address = new_address()
    instance_id = f"i-sig-none-{address.replace('.', '-')}"
    server.add(instance_id=instance_id, addresses=[{"address": address, "network": "default"}],
               vendor_data={"runcmd": ["structured"]})
    for args, said in (([instance_id], "has no user-data"),
                       ([instance_id, "--kind", "vendor-data", "--api", "gce"], "no vendor-data as text"),
                       ([instance_id, "--kind", "vendor-data2", "--api", "ec2"], "only by the OpenStack API"),
                       (["i-nobody"], "no instance 'i-nobody'"), ([], "name an instance")):
        proc = _cli(server, *args)
        assert proc.returncode == 1 and said in proc.stderr, (args, proc.stderr)
    proc = _cli(server, instance_id, "--kind", "vendor-data")
    assert proc.returncode == 0 and "BEGIN SSH SIGNATURE" in proc.stdout  # structured: OpenStack's document
