"""The ``oci`` SDK's instance principals, unmodified, against ``cloudseed serve`` alone, in namespaces.

``InstancePrincipalsSecurityTokenSigner`` reads the region and the certificates from IMDS at
169.254.169.254 (``/opc/v2/instance/region``, ``/opc/v2/identity/{cert,key,intermediate}.pem``),
takes the tenancy from the certificate's subject, and trades the certificate at the federation
endpoint for a security token, which it then signs requests with. Twice: pointed at
``cloudseed serve --oci-auth-listen`` with its ``federation_endpoint`` argument, and with no
argument at all, as the OCI CLI and Terraform use it: at ``https://auth.us-ashburn-1.oraclecloud.com``,
which the guest namespace's hosts file sends to ``--oci-auth-tls-listen ROUTER:443`` and whose
CA (``cloudseed instances identity-certificate --oci-auth``) it trusts through
``REQUESTS_CA_BUNDLE``, as an operator sets them up.
The federation endpoint's refusals are checked with hand-made requests; the certificates'
rotation (certificate and key) with a moved clock on a real registry.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import json

import pytest

from tests.provider.server.cloud_reference import CloudNamespaces
from tests.provider.server.server_support import http, new_address

pytestmark = [pytest.mark.root]

INSTANCE = "ocid1.instance.oc1.iad.cloudseedsdktest"
TENANCY = "ocid1.tenancy.oc1..cloudseedtenancy"
PORT = 8000
AUTH_HOST = "auth.us-ashburn-1.oraclecloud.com"


@pytest.fixture(scope="module")
def oci_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("oci-sdk") / "server.db"),
                            str(tmp_path_factory.mktemp("oci-sdk-server")), config={"rate_limit": 0},
                            serve_extra=("--oci-auth-listen", f"ROUTER:{PORT}", "--oci-auth-tls-listen", "ROUTER:443"))
    with open(f"{cloud.etc}/hosts", "a") as hosts:  # the instance network's name for the auth service
        hosts.write(f"{cloud.router_ip} {AUTH_HOST}\n")
    cloud.server.add(instance_id=INSTANCE, hostname="oci-vm", availability_zone="Uocm:US-ASHBURN-AD-1",
                     addresses=[{"address": cloud.guest_ip, "network": "default", "prefix": 24}], macs=[cloud.mac],
                     clouds={"oracle": {"region": "us-ashburn-1", "tenancy_id": TENANCY}})
    yield cloud
    cloud.close()


GUEST = """
import json, sys
import requests
from oci.auth.signers import InstancePrincipalsSecurityTokenSigner
signer = InstancePrincipalsSecurityTokenSigner(federation_endpoint=sys.argv[1])
token = signer.federation_client.get_security_token()  # the constructor made the exchange
signer.refresh_security_token()  # and again: a new token
refreshed = signer.federation_client.get_security_token()
request = requests.Request("GET", "https://iaas.us-ashburn-1.oraclecloud.com/20160918/instances").prepare()
signer(request)
public = signer.session_key_supplier.get_key_pair()["public"].public_numbers()
print(json.dumps({"token": refreshed, "first": token, "region": signer.region, "tenancy": signer.tenancy_id,
                  "authorization": request.headers["authorization"], "session_n": public.n}))
"""


def verify(cloud, token: str) -> dict:
    import jwt

    keys = jwt.PyJWKSet.from_dict(json.loads(cloud.server.admin("GET", "/v1/keys/jwks", token=None).text))
    key = next(k for k in keys.keys if k.key_id == jwt.get_unverified_header(token)["kid"])
    return jwt.decode(token, key.key, algorithms=["RS256"], audience="oci")


def test_instance_principals_signer_gets_a_token_from_cloudseed_serve(oci_cloud):
    out = oci_cloud.python_in(oci_cloud.gst, GUEST, f"http://{oci_cloud.router_ip}:{PORT}/v1/x509")
    assert out["region"] == "us-ashburn-1" and out["tenancy"] == TENANCY
    claims = verify(oci_cloud, out["token"])
    assert claims["sub"] == INSTANCE and claims["tenant"] == TENANCY and claims["ptype"] == "instance"
    assert claims["exp"] - claims["iat"] == 1200
    # the token binds the signer's session key, and the signer signs requests with it
    jwk = json.loads(claims["jwk"])
    n = int.from_bytes(base64.urlsafe_b64decode(jwk["n"] + "=" * (-len(jwk["n"]) % 4)), "big")
    assert n == out["session_n"]
    assert f'keyId="ST${out["token"]}"' in out["authorization"]
    assert out["first"] != out["token"] and verify(oci_cloud, out["first"])["sub"] == INSTANCE


UNPOINTED = """
import json, ssl, socket
import requests
from oci.auth.signers import InstancePrincipalsSecurityTokenSigner
signer = InstancePrincipalsSecurityTokenSigner()  # no federation_endpoint: the SDK's own https://auth...
token = signer.federation_client.get_security_token()
signer.refresh_security_token()
refreshed = signer.federation_client.get_security_token()
refused = ""
try:  # without the CA (requests' own bundle) the endpoint is not trusted: the check is real
    requests.get("https://auth.us-ashburn-1.oraclecloud.com/", verify=requests.certs.where(), timeout=10)
except requests.exceptions.SSLError as error:
    refused = type(error).__name__
strict = ssl.create_default_context(cafile=__import__("os").environ["REQUESTS_CA_BUNDLE"])
strict.verify_flags |= ssl.VERIFY_X509_STRICT  # Python 3.13's default
with socket.create_connection(("auth.us-ashburn-1.oraclecloud.com", 443), timeout=10) as raw:
    with strict.wrap_socket(raw, server_hostname="auth.us-ashburn-1.oraclecloud.com") as tls:
        version = tls.version()
print(json.dumps({"endpoint": signer.federation_client.federation_endpoint, "first": token, "token": refreshed,
                  "refused": refused, "tls": version}))
"""


def test_unmodified_signer_without_federation_endpoint_gets_a_token_over_tls(oci_cloud, tmp_path):
    import subprocess
    import sys

    from tests.provider.server.server_support import ROOT

    ca = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", oci_cloud.server.db_url,
                         "identity-certificate", "--oci-auth"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert ca.returncode == 0 and "BEGIN CERTIFICATE" in ca.stdout, ca.stderr
    bundle = tmp_path / "ca.pem"
    bundle.write_text(ca.stdout)
    out = oci_cloud.python_in(oci_cloud.gst, UNPOINTED, env={"REQUESTS_CA_BUNDLE": str(bundle)})
    assert out["endpoint"] == f"https://{AUTH_HOST}/v1/x509"
    for token in (out["first"], out["token"]):
        claims = verify(oci_cloud, token)
        assert claims["sub"] == INSTANCE and claims["tenant"] == TENANCY and claims["ptype"] == "instance"
    assert out["first"] != out["token"]
    assert out["refused"] == "SSLError" and out["tls"] in ("TLSv1.2", "TLSv1.3")


def _signed_request(cert_pem: str, key_pem: str, body: bytes, tenancy: str, digest_of: bytes | None = None) -> dict:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    fingerprint = ":".join(f"{b:02X}" for b in cert.fingerprint(hashes.SHA1()))
    headers = {"date": email.utils.formatdate(usegmt=True), "content-length": str(len(body)),
               "content-type": "application/json",
               "x-content-sha256": base64.b64encode(hashlib.sha256(digest_of or body).digest()).decode()}
    names = ["date", "(request-target)", "content-length", "content-type", "x-content-sha256"]
    text = "\n".join(f"{n}: post /v1/x509" if n == "(request-target)" else f"{n}: {headers[n]}" for n in names)
    signature = base64.b64encode(key.sign(text.encode(), padding.PKCS1v15(), hashes.SHA256())).decode()
    headers["authorization"] = (f'Signature version="1",headers="{" ".join(names)}",keyId="{tenancy}/fed-x509/'
                                f'{fingerprint}",algorithm="rsa-sha256",signature="{signature}"')
    return headers


def _body(cert_pem: str) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    session = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    strip = lambda pem: "".join(line for line in pem.splitlines() if not line.startswith("-----"))  # noqa: E731
    public = session.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return json.dumps({"certificate": strip(cert_pem), "publicKey": strip(public.decode())}).encode()


def test_federation_refuses_what_it_did_not_issue(tmp_path):
    from tests.provider.server.server_support import ServerProcess

    server = ServerProcess(str(tmp_path / "db"), str(tmp_path / "srv"), ["127.0.0.1:0"], config={"rate_limit": 0},
                           extra=["--oci-auth-listen", "127.0.0.1:0", "--oci-auth-tls-listen", "127.0.0.1:0"])
    try:
        address = new_address()
        server.add(instance_id="ocid1.instance.oc1..fed", hostname="fed",
                   addresses=[{"address": address, "network": "default"}])
        bearer = {"Authorization": "Bearer Oracle"}
        cert = server.get("/opc/v2/identity/cert.pem", address, headers=bearer).text
        key = server.get("/opc/v2/identity/key.pem", address, headers=bearer).text
        ca = server.get("/opc/v2/identity/intermediate.pem", address, headers=bearer).text
        assert "BEGIN CERTIFICATE" in cert and "PRIVATE KEY" in key and "BEGIN CERTIFICATE" in ca
        assert server.get("/opc/v2/identity/cert.pem", address).status == 401  # the bearer rule holds
        assert server.get("/opc/v2/identity/other.pem", address, headers=bearer).status == 404
        port = int(__import__("re").search(r"oci-auth 127\.0\.0\.1:(\d+)", server.log()).group(1))
        tenancy = __import__("re").search(r"opc-tenant:([^,\n]+)", _subject_text(cert)).group(1)

        def post(headers, body):
            return http(port, "/v1/x509", "POST", headers=headers, body=body)

        body = _body(cert)
        ok = post(_signed_request(cert, key, body, tenancy), body)
        assert ok.status == 200 and ok.json()["token"].count(".") == 2
        assert post(_signed_request(cert, key, body, tenancy, digest_of=b"other"), body).status == 401
        wrong_tenancy = post(_signed_request(cert, key, body, "ocid1.tenancy.oc1..other"), body)
        assert wrong_tenancy.status == 401 and "keyId" in wrong_tenancy.json()["message"]
        unsigned = post({"content-type": "application/json"}, body)
        assert unsigned.status == 401
        foreign_cert, foreign_key = _self_signed(tenancy)
        foreign_body = _body(foreign_cert)
        foreign = post(_signed_request(foreign_cert, foreign_key, foreign_body, tenancy), foreign_body)
        assert foreign.status == 401 and "not issued" in foreign.json()["message"]
        assert post({}, b"not json").status == 400
        # the TLS listener: the same answers, two requests on one connection
        tls_port = int(__import__("re").search(r"oci-auth-tls 127\.0\.0\.1:(\d+)", server.log()).group(1))
        answers = _over_tls(server, tls_port, [(_signed_request(cert, key, body, tenancy), body),
                                               ({"content-type": "application/json"}, b"not json")])
        assert [status for status, _ in answers] == [200, 400] and answers[0][1]["token"].count(".") == 2
        server.admin("DELETE", "/v1/instances/ocid1.instance.oc1..fed")
        gone = post(_signed_request(cert, key, body, tenancy), body)
        assert gone.status == 401 and "no instance" in gone.json()["message"]
    finally:
        server.stop()


def _over_tls(server, port: int, requests: list) -> list:
    """(status, JSON) of each request, on one TLS connection verified with the registry's CA for AUTH_HOST."""
    import http.client
    import ssl
    import subprocess
    import sys
    import tempfile

    from tests.provider.server.server_support import ROOT

    ca = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", server.db_url, "identity-certificate",
                         "--oci-auth"], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as bundle:
        bundle.write(ca)
        bundle.flush()
        context = ssl.create_default_context(cafile=bundle.name)
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    conn.sock = context.wrap_socket(__import__("socket").create_connection(("127.0.0.1", port), timeout=10),
                                    server_hostname=AUTH_HOST)  # the name the SDK asks for, at this address
    answers = []
    try:
        for headers, body in requests:
            conn.request("POST", "/v1/x509", body=body, headers=headers)
            reply = conn.getresponse()
            answers.append((reply.status, json.loads(reply.read())))
    finally:
        conn.close()
    return answers


def _subject_text(cert_pem: str) -> str:
    from cryptography import x509

    return x509.load_pem_x509_certificate(cert_pem.encode()).subject.rfc4514_string()


def _self_signed(tenancy: str) -> tuple[str, str]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cloudseed OCI instance principal CA"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "opc-instance:ocid1.instance.oc1..fed"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, f"opc-tenant:{tenancy}")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(7).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1)).sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM).decode(),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())


def test_certificates_rotate_and_every_process_issues_the_same(tmp_path):
    from cryptography import x509

    from cloudseed.provider.registry import InstanceRecord, open_registry
    from cloudseed.provider.server.credentials.credential_keys import shared_key
    from cloudseed.provider.server.credentials.oci_identity import ROTATION, VALIDITY, OciIdentity

    class Clock:
        now = 1_800_000_000.0

        def __call__(self):
            return self.now

    def leaf_rows() -> list:
        with registry._cursor() as cur:
            cur.execute("SELECT name FROM settings WHERE name LIKE 'oci_leaf_key/%'")
            return sorted(row[0] for row in cur.fetchall())

    registry = open_registry(str(tmp_path / "db"))
    try:
        record = InstanceRecord(instance_id="ocid1.instance.oc1..rot", hostname="rot", project_id="p")
        registry.add(record)
        clock = Clock()
        key = shared_key(registry)
        one, two = OciIdentity(registry, key, clock), OciIdentity(registry, key, clock)
        first, key = one.leaf(record)
        assert two.leaf(record) == (first, key)  # another server process: the same bytes
        cert = x509.load_pem_x509_certificate(first.encode())
        assert (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds() == VALIDITY
        units = [a.value for a in cert.subject if a.oid == x509.oid.NameOID.ORGANIZATIONAL_UNIT_NAME]
        assert "opc-instance:ocid1.instance.oc1..rot" in units and any(u.startswith("opc-tenant:ocid1.tenancy.")
                                                                        for u in units)
        assert one.check_leaf(first.encode()) is not None
        window = int(clock.now // ROTATION)
        assert leaf_rows() == [f"oci_leaf_key/ocid1.instance.oc1..rot/{window}"]
        clock.now += ROTATION
        second, new_key = one.leaf(record)  # a new certificate, and a new key with it
        assert second != first and new_key != key and two.leaf(record) == (second, new_key)
        rotated = x509.load_pem_x509_certificate(second.encode())
        assert rotated.serial_number != cert.serial_number
        from cryptography.hazmat.primitives import serialization

        assert rotated.public_key().public_numbers() == serialization.load_pem_private_key(
            new_key.encode(), password=None).public_key().public_numbers()  # the pair matches
        assert leaf_rows() == [f"oci_leaf_key/ocid1.instance.oc1..rot/{window + 1}"]  # the old key is gone
        assert one.check_leaf(first.encode()) is not None  # the old certificate is valid for its hour of overlap
        clock.now += VALIDITY
        with pytest.raises(ValueError, match="not valid now"):
            one.check_leaf(first.encode())
        registry.delete(record.instance_id)  # the instance's keys go with it
        assert leaf_rows() == []
    finally:
        registry.close()


ECHO = """
import http.server, json, sys
class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"authorization": self.headers.get("authorization", "")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), Echo)
print("ready", flush=True)
server.serve_forever()
"""


def test_oci_cli_with_instance_principal_auth(oci_cloud, tmp_path):
    """The OCI CLI (its own venv, scripts/setup.sh: it pins PyYAML and certifi below what the dev venv
    has) signs a request as the instance with a token from cloudseed serve, found where the CLI looks
    (https://auth.us-ashburn-1.oraclecloud.com, the TLS listener): ``--auth instance_principal`` and
    the CA in ``OCI_CLI_CERT_BUNDLE``, nothing else. The request goes to a small echo server."""
    import os
    import subprocess
    import sys

    from tests.provider.server.server_support import ROOT

    venv = os.environ.get("CLOUDSEED_OCI_CLI_VENV", os.path.expanduser("~/.cache/cloudseed-oci-cli-venv"))
    cli = os.path.join(venv, "bin", "oci")
    if not os.access(cli, os.X_OK):
        pytest.skip(f"the OCI CLI is not installed ({cli}; scripts/setup.sh installs it)")
    ca = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", oci_cloud.server.db_url,
                         "identity-certificate", "--oci-auth"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    (tmp_path / "ca.pem").write_text(ca.stdout)
    echo = subprocess.Popen(["ip", "netns", "exec", oci_cloud.srv, sys.executable, "-c", ECHO, oci_cloud.router_ip,
                             "9000"], stdout=subprocess.PIPE, text=True)
    try:
        assert echo.stdout.readline().strip() == "ready"
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env.update(OCI_CLI_CERT_BUNDLE=str(tmp_path / "ca.pem"), HOME=str(tmp_path))
        done = subprocess.run(["ip", "netns", "exec", oci_cloud.gst, cli, "raw-request", "--auth", "instance_principal",
                               "--http-method", "GET", "--target-uri",
                               f"http://{oci_cloud.router_ip}:9000/20160918/instances"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        answer = json.loads(done.stdout)  # the echo of the request the CLI signed
    finally:
        echo.kill()
        echo.wait()
    authorization = answer["data"]["authorization"]
    token = authorization.split('keyId="ST$', 1)[1].split('"', 1)[0]
    claims = verify(oci_cloud, token)
    assert claims["sub"] == INSTANCE and claims["tenant"] == TENANCY


def test_tls_listener_setting_and_certificate_names(tmp_path):
    from cryptography import x509

    from cloudseed.provider.registry import open_registry
    from cloudseed.provider.server.config import ConfigError, load_config
    from cloudseed.provider.server.credentials import oci_auth_tls

    (tmp_path / "ok.yaml").write_text("oci_auth_tls_listen: ['10.0.0.2:443']\n")
    assert [(s.host, s.port) for s in load_config(str(tmp_path / "ok.yaml"), {}).oci_auth_tls_listen] == [
        ("10.0.0.2", 443)]
    # a name, a superscript two, 5,000 digits: each a ConfigError naming the setting (the last two were
    # ValueErrors from int(), a traceback instead of the error)
    for port in ("auth.example:443", "10.0.0.2:\u00b2", "10.0.0.2:" + "4" * 5000, "10.0.0.2:65536"):
        (tmp_path / "bad.yaml").write_text(f"oci_auth_tls_listen: ['{port}']\n", encoding="utf-8")
        with pytest.raises(ConfigError, match="oci_auth_tls_listen"):
            load_config(str(tmp_path / "bad.yaml"), {})
    registry = open_registry(str(tmp_path / "db"))
    try:
        ca_pem = oci_auth_tls.shared_ca(registry)
        assert oci_auth_tls.shared_ca(registry) == ca_pem  # the registry's, made once
        cert_pem, _key = oci_auth_tls.server_certificate(ca_pem)
    finally:
        registry.close()
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName)
    assert AUTH_HOST in names and "auth.eu-frankfurt-1.oraclecloud.com" in names
    assert "auth.us-langley-1.oraclegovcloud.com" in names and "auth.eu-frankfurt-2.oraclecloud.eu" in names
