"""ca_certs: the bundle and ca-certificates.conf (Debian), the anchor (RHEL), bad certificates named.
"""

from __future__ import annotations

from tests.agent.modules.module_support import run

CERT = """-----BEGIN CERTIFICATE-----
MIIBszCCAVmgAwIBAgIUYmFzZTY0IGNlcnRpZmljYXRlIGZvciB0ZXN0czAKBggq
hkjOPQQDAjAUMRIwEAYDVQQDDAl0ZXN0LWNhLTEwHhcNMjQwMTAxMDAwMDAwWhcN
-----END CERTIFICATE-----"""


def test_ca_certs_debian(target):
    target.write("/etc/ca-certificates.conf", "# header\nmozilla/A.crt\nmozilla/B.crt\n")
    result, _ = run(target, "ca_certs", {"ca_certs": {"trusted": [CERT, "garbage"], "remove_defaults": True}})
    assert result.status == "failed" and result.reason.startswith("ca_certs.trusted[1]: not a PEM certificate")
    assert target.read_text("/usr/share/ca-certificates/cloudseed-ca-certs.crt") == CERT + "\n"
    assert target.read_text("/etc/ca-certificates.conf") == \
        "# header\n!mozilla/A.crt\n!mozilla/B.crt\ncloudseed-ca-certs.crt\n"


def test_ca_certs_bad_certificate_named(target):
    target.write("/etc/ca-certificates.conf", "")
    result, _ = run(target, "ca_certs", {"ca_certs": {"trusted": ["-----BEGIN CERTIFICATE-----\nnope"]}})
    assert not target.exists("/usr/share/ca-certificates/cloudseed-ca-certs.crt")
    assert target.read_text("/etc/ca-certificates.conf") == ""
    assert result.status == "failed" and "ca_certs.trusted[0]" in result.reason


def test_ca_certs_rhel_anchor(rhel_target):
    rhel_target.write("/usr/share/pki/ca-trust-source/ca-bundle.trust.p11-kit", "defaults")
    run(rhel_target, "ca_certs", {"ca_certs": {"trusted": [CERT], "remove_defaults": True}})
    assert rhel_target.read_text("/usr/share/pki/ca-trust-source/anchors/cloudseed-ca-certs.crt") == CERT + "\n"
    assert not rhel_target.exists("/usr/share/pki/ca-trust-source/ca-bundle.trust.p11-kit")
