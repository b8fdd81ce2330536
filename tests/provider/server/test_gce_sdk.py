"""google-auth, unmodified, against ``cloudseed serve`` as GCE's metadata server, in network namespaces.

The guest namespace resolves ``metadata.google.internal`` to 169.254.169.254, where the server
listens (``CloudNamespaces``); google-auth runs with its defaults, as on a GCE VM: ``default()``
finds the metadata server by its own ``ping()`` (``GET /`` with ``Metadata-Flavor: Google``),
refreshes access tokens, and ``fetch_id_token`` gets identity tokens. A verifier in the server's
namespace checks those with ``google.oauth2.id_token.verify_token`` against the keys the admin
listener publishes (``/v1/keys/certs`` and the JWKS ``/v1/keys/jwks``), and access tokens with the
admin listener's tokeninfo. Tokens live 12 s here (``access_token_seconds``), so the test sees
one expire and its refresh; identity tokens keep GCE's hour.
"""

from __future__ import annotations

import json

import pytest

from tests.provider.server.cloud_reference import CloudNamespaces

pytestmark = [pytest.mark.root]

AUDIENCE = "https://service.example.com"
LIFETIME = 12
OWN_ACCOUNT = "app-sa@my-project.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def gce(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("gce-sdk") / "server.db"),
                            str(tmp_path_factory.mktemp("gce-sdk-server")),
                            config={"access_token_seconds": LIFETIME, "rate_limit": 0})
    yield cloud
    cloud.close()


def register(cloud, instance_id: str, **gce_settings) -> None:
    cloud.server.admin("DELETE", f"/v1/instances/{instance_id}")
    for other in ("5550001", "5550002", "5550003"):
        cloud.server.admin("DELETE", f"/v1/instances/{other}")
    cloud.server.add(instance_id=instance_id, name="sdk-vm", hostname="sdk-vm", availability_zone="europe-west4-a",
                     addresses=[{"address": cloud.guest_ip, "network": "default", "prefix": 24}], macs=[cloud.mac],
                     clouds={"gce": {"project_id": "my-project", "numeric_project_id": 424242, **gce_settings}})


GUEST = """
import calendar, json, sys, time
import google.auth, google.auth.transport.requests
from google.oauth2 import id_token
request = google.auth.transport.requests.Request()
credentials, project = google.auth.default()
out = {"class": type(credentials).__module__ + "." + type(credentials).__name__, "project": project}
credentials.refresh(request)
first, expiry = credentials.token, calendar.timegm(credentials.expiry.timetuple())
out.update(first=first, expiry=expiry, now=time.time(), email=credentials.service_account_email,
           scopes=credentials.scopes, universe=credentials.universe_domain)
out["identity"] = id_token.fetch_id_token(request, sys.argv[1])
time.sleep(max(0, expiry - time.time()) + 0.5)  # the first token has ended
out["valid_after_expiry"] = credentials.valid
credentials.refresh(request)
out["second"] = credentials.token
out["second_expires_in"] = calendar.timegm(credentials.expiry.timetuple()) - time.time()
print(json.dumps(out))
"""

VERIFY = """
import json, sys
import google.auth.transport.requests
from google.oauth2 import id_token
request = google.auth.transport.requests.Request()
token, audience, admin = sys.argv[1:4]
out = {"pem": id_token.verify_token(token, request, audience=audience, certs_url=admin + "/v1/keys/certs"),
       "jwks": id_token.verify_token(token, request, audience=audience, certs_url=admin + "/v1/keys/jwks")}
try:
    id_token.verify_token(token, request, audience="https://someone-else.example", certs_url=admin + "/v1/keys/certs")
    out["other_audience"] = "accepted"
except ValueError as error:
    out["other_audience"] = str(error)
print(json.dumps(out))
"""


def tokeninfo(cloud, token: str):
    return cloud.server.admin("GET", f"/v1/credentials/gce/tokeninfo?access_token={token}", token=None)


def test_google_auth_default_tokens_refresh_and_identity_tokens_verify(gce):
    register(gce, "5550001")
    out = gce.python_in(gce.gst, GUEST, AUDIENCE)
    email = "424242-compute@developer.gserviceaccount.com"
    assert out["class"] == "google.auth.compute_engine.credentials.Credentials"
    assert out["project"] == "my-project" and out["email"] == email and out["universe"] == "googleapis.com"
    assert out["scopes"] == ["https://www.googleapis.com/auth/cloud-platform"]
    assert 0 < out["expiry"] - out["now"] <= LIFETIME + 1
    # the first token expired while the guest waited: the resource server's view says so; the
    # refreshed one is another token, valid, with the account's email and scopes
    assert out["valid_after_expiry"] is False and out["second"] != out["first"]
    assert out["second_expires_in"] > 1
    assert tokeninfo(gce, out["first"]).status == 400
    info = tokeninfo(gce, out["second"])
    assert info.status == 200, info.text
    info = info.json()
    assert info["email"] == email and info["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    assert info["instance_id"] == "5550001"
    assert tokeninfo(gce, out["second"][:-2] + "xx").status == 400  # a forged MAC
    # the identity token verifies with google-auth against the published keys, in both forms
    admin = f"http://127.0.0.1:{gce.server.admin_port}"
    checked = gce.python_in(gce.srv, VERIFY, out["identity"], AUDIENCE, admin)
    for form in ("pem", "jwks"):
        claims = checked[form]
        assert claims["aud"] == AUDIENCE and claims["email"] == email and claims["iss"] == "https://accounts.google.com"
        assert claims["exp"] - claims["iat"] == 3600 and claims["email_verified"] is True
        engine = claims["google"]["compute_engine"]  # fetch_id_token asks format=full
        assert engine["project_id"] == "my-project" and engine["project_number"] == 424242
        assert engine["zone"] == "europe-west4-a" and engine["instance_name"] == "sdk-vm"
        assert engine["instance_id"] == "5550001" and engine["instance_creation_timestamp"] > 1_600_000_000
    assert "audience" in checked["other_audience"].lower()


OWN = """
import json, sys
import google.auth, google.auth.transport.requests
from google.auth import compute_engine, exceptions
request = google.auth.transport.requests.Request()
out = {}
credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/devstorage.read_only"])
try:
    credentials.refresh(request)
    out["default"] = [credentials.service_account_email, credentials.token[:7]]
except exceptions.RefreshError as error:
    out["default"] = "refused: " + str(error)[:200]
try:
    named = compute_engine.Credentials(service_account_email=sys.argv[1])
    named.refresh(request)
    out["named"] = named.service_account_email
except exceptions.RefreshError as error:
    out["named"] = "refused: " + str(error)[:200]
print(json.dumps(out))
"""


def test_accounts_of_the_record_and_none(gce):
    """The record's own service accounts (the first is ``default``); ``[]``: none, as a VM created
    without one, so google-auth finds the metadata server but cannot refresh."""
    register(gce, "5550002", service_accounts=[{"email": OWN_ACCOUNT, "scopes": ["https://www.googleapis.com/auth/"
                                                                                 "devstorage.read_only"]}])
    out = gce.python_in(gce.gst, OWN, OWN_ACCOUNT)
    assert out["default"] == [OWN_ACCOUNT, "ya29.c."] and out["named"] == OWN_ACCOUNT
    register(gce, "5550003", service_accounts=[])
    out = gce.python_in(gce.gst, OWN, OWN_ACCOUNT)
    assert out["default"].startswith("refused") and "404" in out["default"]
    assert out["named"].startswith("refused")


def test_the_public_keys_are_the_same_in_both_forms(gce):
    certs = gce.server.admin("GET", "/v1/keys/certs", token=None)
    jwks = gce.server.admin("GET", "/v1/keys/jwks", token=None)
    assert certs.status == 200 and jwks.status == 200
    (kid, pem), = json.loads(certs.text).items()
    (key,) = json.loads(jwks.text)["keys"]
    assert key["kid"] == kid and key["alg"] == "RS256" and key["kty"] == "RSA" and "BEGIN CERTIFICATE" in pem
