"""Azure's attested documents, signed in process: the PKCS#7 frame, the keys, and the answers kept per second.

``pkcs7_der.SignedTemplate`` puts a new document and signature in the frame of one PKCS#7 made by
``cryptography``'s builder: with RSA (deterministic signatures) it must be byte for byte what the
builder makes; with ECDSA, ``openssl smime`` and ``openssl cms`` (the verifiers Azure's
documentation uses) must accept it. ``AttestedAnswers`` keeps an answer for the second it was
made in, per instance and nonce, within a bound; a moved clock drives it.
"""

from __future__ import annotations

import base64
import json
import subprocess

import pytest

from cloudseed.provider.server.credentials import azure_attested, ec2_identity
from cloudseed.provider.server.credentials.azure_attested import AttestedAnswers, AttestedSigner

COMPUTE = {"vmId": "6e4a0c4b-9b1f-4f7e-8a57-0c1d2e3f4a5b", "subscriptionId": "0f0e0d0c-0b0a-4909-8807-060504030201",
           "sku": "22_04-lts-gen2"}


def _openssl_verifies(tmp_path, signer: AttestedSigner, signed: bytes) -> bytes:
    from cryptography.hazmat.primitives import serialization

    (tmp_path / "p7").write_bytes(signed)
    (tmp_path / "cert.pem").write_bytes(signer.certificate.public_bytes(serialization.Encoding.PEM))
    out = b""
    for tool in ("smime", "cms"):
        done = subprocess.run(["openssl", tool, "-verify", "-inform", "DER", "-in", str(tmp_path / "p7"),
                               "-certfile", str(tmp_path / "cert.pem"), "-noverify"], capture_output=True, timeout=30)
        assert done.returncode == 0, (tool, done.stderr)
        out = done.stdout
    return out


def test_the_frame_is_the_builders_and_openssl_verifies_both_keys(tmp_path):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.serialization import pkcs7

    document = json.dumps({"nonce": "n" * 32, "vmId": COMPUTE["vmId"], "pad": "x" * 400}).encode()
    options = [pkcs7.PKCS7Options.Binary, pkcs7.PKCS7Options.NoAttributes]
    rsa = AttestedSigner(ec2_identity.make_key_and_certificate())
    builder = (pkcs7.PKCS7SignatureBuilder().set_data(document).add_signer(rsa.certificate, rsa.key, hashes.SHA256())
               .sign(serialization.Encoding.DER, options))
    assert rsa.sign(document) == builder  # every byte: lengths, certificate, algorithms, signature
    assert _openssl_verifies(tmp_path, rsa, rsa.sign(document)) == document
    ecdsa = AttestedSigner(azure_attested.make_key_and_certificate())
    assert ecdsa.key.curve.name == "secp256r1"
    for content in (b"{}", document, document * 200):  # one-byte, two-byte and three-byte lengths
        signed = ecdsa.sign(content)
        assert _openssl_verifies(tmp_path, ecdsa, signed) == content
        assert pkcs7.load_der_pkcs7_certificates(signed) == [ecdsa.certificate]  # what clients extract
    # the frame is checked: a tampered document does not verify
    tampered = ecdsa.sign(document).replace(b'"pad"', b'"bad"')
    (tmp_path / "p7").write_bytes(tampered)
    refused = subprocess.run(["openssl", "smime", "-verify", "-inform", "DER", "-in", str(tmp_path / "p7"),
                              "-certfile", str(tmp_path / "cert.pem"), "-noverify"], capture_output=True, timeout=30)
    assert refused.returncode != 0


class Clock:
    now = 1_800_000_000.25

    def __call__(self) -> float:
        return self.now


def _document(answer) -> dict:
    """The attested JSON inside an answer's PKCS#7 (read from the DER: ContentInfo, SignedData, content)."""
    from cloudseed.provider.server.credentials.pkcs7_der import children

    body = json.loads(answer.body)
    assert body["encoding"] == "pkcs7"
    der = base64.b64decode(body["signature"])
    (outer,) = children(der, 0, len(der))
    _oid, wrapper = children(der, outer[2], outer[3])
    (signed_data,) = children(der, wrapper[2], wrapper[3])
    encap = children(der, signed_data[2], signed_data[3])[2]
    (explicit,) = children(der, children(der, encap[2], encap[3])[1][2], encap[3])
    return json.loads(der[explicit[2]:explicit[3]])


def test_answers_are_kept_for_their_second_per_instance_and_nonce(monkeypatch):
    clock = Clock()
    answers = AttestedAnswers(AttestedSigner(azure_attested.make_key_and_certificate()), clock)
    one, other = object(), object()  # two CachedInstances (a changed record is a new one)
    first = answers.answer(one, COMPUTE, "")
    doc = _document(first)
    assert doc["nonce"] == "20270115-080000" and doc["timeStamp"] == {
        "createdOn": "01/15/27 08:00:00 -0000", "expiresOn": "01/15/27 14:00:00 -0000"}
    assert doc["vmId"] == COMPUTE["vmId"] and doc["plan"] == {"name": "", "product": "", "publisher": ""}
    clock.now += 0.7  # the same second: the same answer (an ECDSA signature differs each time it is made)
    assert answers.answer(one, COMPUTE, "") is first and answers.signed == 1
    assert _document(answers.answer(one, COMPUTE, "abc"))["nonce"] == "abc" and answers.signed == 2
    assert answers.answer(one, COMPUTE, "abc") is answers.answer(one, COMPUTE, "abc") and answers.signed == 2
    assert answers.answer(other, COMPUTE, "") is not first and answers.signed == 3
    clock.now += 0.1  # the next second: signed again, with its time; the old second's answers are gone
    second = answers.answer(one, COMPUTE, "")
    assert second is not first and _document(second)["nonce"] == "20270115-080001" and answers.signed == 4
    assert len(answers.kept) == 1
    monkeypatch.setattr(azure_attested, "MAX_KEPT", 3)  # bounded: past it answered, not kept
    for nonce in ("a", "b", "c", "d"):
        answers.answer(one, COMPUTE, nonce)
    assert len(answers.kept) == 3 and answers.answer(one, COMPUTE, "d") is not answers.answer(one, COMPUTE, "d")


def test_the_key_is_the_servers_choice(tmp_path):
    from cloudseed.provider.registry import open_registry
    from cloudseed.provider.server.config import ConfigError, load_config
    from cloudseed.provider.server.credentials.cloud_credentials import CloudCredentials

    registry = open_registry(str(tmp_path / "db"))
    try:
        ecdsa = CloudCredentials(registry).attested.signer
        rsa = CloudCredentials(registry, attested_key="rsa").attested.signer
        assert ecdsa.key.curve.name == "secp256r1"
        identity = ec2_identity.IdentitySigner(ec2_identity.shared_pem(registry))
        assert rsa.certificate == identity.certificate  # EC2's identity key and certificate
        assert CloudCredentials(registry).attested.signer.certificate == ecdsa.certificate  # kept in the registry
    finally:
        registry.close()
    (tmp_path / "bad.yaml").write_text("azure_attested_key: dsa\n")
    with pytest.raises(ConfigError, match="azure_attested_key must be 'ecdsa' or 'rsa'"):
        load_config(str(tmp_path / "bad.yaml"), {})
