"""No token outlives the cap of the API that issued the credential it was traded for.

Issue 23's adversarial run traded a 5-second EC2 token for a 12-hour Akamai token (``PUT /v1/token``
with ``Metadata-Token-Expiry-Seconds: 43200``) and read ``/latest/user-data`` with it after the EC2
token had expired. Now a token is accepted only by the API that issued it, and a token issued
against another token expires no later than that one. Real server on loopback, both backends.
"""

from __future__ import annotations

import time

from cloudseed.provider.server.imds_tokens import TokenError, TokenIssuer
from tests.provider.server.server_support import new_address

USER_DATA = "#cloud-config\nhostname: secret-bearing\n"


def register(server, **extra) -> str:
    address = new_address()
    fields = {"instance_id": f"tk-{address.replace('.', '-')}", "hostname": "tk",
              "addresses": [{"address": address, "network": "default"}], "user_data": USER_DATA,
              "clouds": {"akamai": {}}}
    fields.update(extra)
    server.add(**fields)
    return address


def ec2_token(server, address: str, ttl: int) -> str:
    reply = server.get("/latest/api/token", address, method="PUT",
                       headers={"X-aws-ec2-metadata-token-ttl-seconds": str(ttl)})
    assert reply.status == 200, reply.text
    return reply.text


def akamai_token(server, address: str, seconds: int, ec2: str | None = None) -> str:
    headers = {"Metadata-Token-Expiry-Seconds": str(seconds)}
    if ec2:
        headers["X-aws-ec2-metadata-token"] = ec2
    reply = server.get("/v1/token", address, method="PUT", headers=headers)
    assert reply.status == 200, reply.text
    return reply.text


def test_an_akamai_token_traded_for_a_short_ec2_token_dies_with_it(server):
    address = register(server, imds_tokens="required")
    short = ec2_token(server, address, 1)
    long = akamai_token(server, address, 43200, ec2=short)
    headers = {"Metadata-Token": long, "X-aws-ec2-metadata-token": short}
    assert server.get("/v1/user-data", address, headers=headers).status == 200
    # the Akamai token is not an EC2 token, however long it lives
    refused = server.get("/latest/user-data", address, headers={"X-aws-ec2-metadata-token": long})
    assert refused.status == 401 and USER_DATA not in refused.text
    time.sleep(2.2)  # the EC2 token (1 s) has expired: so has what it was traded for
    assert server.get("/v1/user-data", address, headers={"Metadata-Token": long}).status == 401
    assert server.get("/latest/user-data", address, headers={"X-aws-ec2-metadata-token": long}).status == 401


def test_tokens_are_accepted_only_by_their_own_api(server):
    address = register(server)
    akamai = akamai_token(server, address, 43200)
    assert server.get("/v1/user-data", address, headers={"Metadata-Token": akamai}).status == 200
    for path in ("/latest/user-data", "/latest/meta-data/instance-id", "/openstack/latest/user_data",
                 "/nocloud/user-data"):
        reply = server.get(path, address, headers={"X-aws-ec2-metadata-token": akamai})
        assert reply.status == 401 and "another API" in reply.text, path
    ec2 = ec2_token(server, address, 60)
    assert server.get("/v1/instance", address, headers={"Metadata-Token": ec2}).status == 401
    assert server.get("/latest/user-data", address, headers={"X-aws-ec2-metadata-token": ec2}).status == 200


def test_required_instances_reach_akamai_with_its_own_tokens(server):
    # Akamai's PUT-then-header protocol holds against SSRF as IMDSv2 does: it needs no EC2 token
    address = register(server, imds_tokens="required")
    token = akamai_token(server, address, 60)
    assert server.get("/v1/user-data", address, headers={"Metadata-Token": token}).status == 200
    assert server.get("/latest/user-data", address).status == 401  # EC2's paths still need an EC2 token


def test_issuer_caps_and_scopes():
    now = [1_000_000.0]
    issuer = TokenIssuer(b"k" * 32, clock=lambda: now[0])
    ec2 = issuer.issue("i-1", 5)
    issuer.check(ec2, "i-1")
    traded = issuer.issue("i-1", 43200, "akamai", not_after=issuer.expiry_of(ec2))
    issuer.check(traded, "i-1", "akamai")
    now[0] += 6
    for token, scope in ((ec2, "ec2"), (traded, "akamai")):
        try:
            issuer.check(token, "i-1", scope)
        except TokenError as error:
            assert "expired" in str(error)
        else:
            raise AssertionError(f"{scope} token still valid after the EC2 token expired")
    fresh = TokenIssuer(b"k" * 32, clock=lambda: now[0])  # another server: the MAC covers the scope too
    try:
        fresh.check(issuer.issue("i-1", 60, "akamai"), "i-1")
    except TokenError as error:
        assert "another API" in str(error)
    else:
        raise AssertionError("an akamai token passed as an EC2 token")
