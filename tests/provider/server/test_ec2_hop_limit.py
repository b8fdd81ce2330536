"""Per-instance IMDSv2 hop limit (``ec2.hop_limit``): the token reply's IP TTL is the instance's.

The namespaces of reference_netns.py (``router_namespaces``): ``far`` reaches the server through the router
``rtr``, two hops away. With the server's default (1) its token reply dies on the way; an
instance whose record says ``hop_limit: 2`` gets its token there.
"""

from __future__ import annotations

import pytest

from tests.provider.server.reference_netns import curl_in
from tests.provider.server.server_support import ServerProcess

pytestmark = [pytest.mark.root]
URL = "http://169.254.169.254"
PUT = ["-X", "PUT", "-H", "X-aws-ec2-metadata-token-ttl-seconds: 60", f"{URL}/latest/api/token"]


def test_an_instance_hop_limit_lets_its_token_cross_a_router(router_namespaces, tmp_path):
    server = ServerProcess(str(tmp_path / "server.db"), str(tmp_path / "server"), ["169.254.169.254:80"],
                           extra=["--rate-limit", "0"], netns=router_namespaces["srv"])
    try:
        server.add(instance_id="i-far-hop", hostname="far", addresses=["10.78.0.5"])
        assert curl_in(router_namespaces["far"], f"{URL}/latest/meta-data/instance-id").stdout == "i-far-hop"
        refused = curl_in(router_namespaces["far"], *PUT)
        assert refused.returncode != 0 and not refused.stdout  # TTL 1: lost at the router
        assert server.admin("PATCH", "/v1/instances/i-far-hop", {"ec2": {"hop_limit": 2}}).status == 200
        for _ in range(20):  # the server drops its cached copy when the registry changes
            token = curl_in(router_namespaces["far"], *PUT)
            if token.stdout:
                break
        assert token.returncode == 0 and token.stdout
        reply = curl_in(router_namespaces["far"], "-H", f"X-aws-ec2-metadata-token: {token.stdout}",
                        f"{URL}/latest/meta-data/instance-id")
        assert reply.stdout == "i-far-hop"
    finally:
        server.stop()
