"""PROXY protocol listeners: the header parser, and a real ``cloudseed serve`` behind a "balancer".

The balancer here is this test process on 127.0.0.1 (the configured ``proxy_protocol_from``),
sending the headers haproxy sends; the instances are 127.1.x.y addresses. The real haproxy in
front of several servers is tests/provider/server/test_multi_host.py.
"""

from __future__ import annotations

import socket

import pytest

from cloudseed.provider.server.engine.proxy_protocol import ProxyProtocolError, encode_v1, encode_v2, parse
from tests.provider.server.server_support import ServerProcess, new_address

# -- the parser -------------------------------------------------------------------------------


def test_v1_and_v2_headers_name_the_client():
    v1 = encode_v1("10.0.0.5", 40000, "169.254.169.254", 80)
    assert parse(v1 + b"GET / HTTP/1.1\r\n") == (len(v1), ("10.0.0.5", 40000))
    v2 = encode_v2("10.0.0.5", 40001, "169.254.169.254", 80)
    assert len(v2) == 28 and parse(v2 + b"GET") == (28, ("10.0.0.5", 40001))
    v6 = encode_v2("fd00::5", 1, "fd00::1", 80)
    assert parse(v6) == (52, ("fd00::5", 1))
    assert parse(encode_v1("fd00::5", 2, "fd00::1", 80))[1] == ("fd00::5", 2)


def test_ipv4_mapped_sources_are_ipv4():
    assert parse(encode_v2("::ffff:10.0.0.5", 3, "::ffff:10.0.0.1", 80))[1] == ("10.0.0.5", 3)


def test_local_and_unknown_mean_the_balancer_itself():
    local = b"\r\n\r\n\x00\r\nQUIT\n" + bytes((0x20, 0x00)) + (0).to_bytes(2, "big")
    assert parse(local) == (16, None)
    assert parse(b"PROXY UNKNOWN\r\nGET") == (15, None)
    assert parse(b"PROXY UNKNOWN 1.2.3.4 5.6.7.8 1 2\r\n") == (35, None)


def test_tlvs_are_skipped():
    header = encode_v2("10.0.0.7", 5, "10.0.0.1", 80)
    tlv = bytes((0x05, 0x00, 0x03)) + b"abc"  # PP2_TYPE_UNIQUE_ID
    longer = header[:14] + (len(header) - 16 + len(tlv)).to_bytes(2, "big") + header[16:] + tlv
    assert parse(longer + b"GET /") == (len(longer), ("10.0.0.7", 5))


@pytest.mark.parametrize("cut", range(1, 28))
def test_a_header_in_pieces_waits_for_the_rest(cut):
    header = encode_v2("10.0.0.5", 40001, "169.254.169.254", 80)
    assert parse(header[:cut]) is None
    v1 = encode_v1("10.0.0.5", 40000, "169.254.169.254", 80)
    assert parse(v1[:cut]) is None


@pytest.mark.parametrize("data, problem", [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "did not start with a PROXY protocol header"),
    (b"PROXY TCP4 10.0.0.5 10.0.0.1 1\r\n", "malformed PROXY v1 line"),
    (b"PROXY TCP4 10.0.0.500 10.0.0.1 1 2\r\n", "is not an IPv4 address"),
    (b"PROXY TCP4 010.0.0.5 10.0.0.1 1 2\r\n", "is not an IPv4 address"),
    (b"PROXY TCP4 10.0.0.5 10.0.0.1 65536 2\r\n", "is not 0-65535"),
    (b"PROXY TCP6 10.0.0.5 10.0.0.1 1 2\r\n", "is not an IPv6 address"),
    (b"PROXY TCP4 10.0.0.5 10.0.0.1 1 2\n", "without CRLF"),
    (b"PROXY " + b"x" * 120, "without CRLF"),
    (b"\r\n\r\n\x00\r\nQUIT\n" + bytes((0x31, 0x11, 0, 12)) + bytes(12), "version 3"),
    (b"\r\n\r\n\x00\r\nQUIT\n" + bytes((0x22, 0x11, 0, 12)) + bytes(12), "command 2"),
    (b"\r\n\r\n\x00\r\nQUIT\n" + bytes((0x21, 0x11, 0, 4)) + bytes(4), "shorter than its addresses"),
    (b"\r\n\r\n\x00\r\nQUIT\n" + bytes((0x21, 0x12, 0, 12)) + bytes(12), "datagram"),
    (b"\r\n\r\n\x00\r\nQUIT\n" + bytes((0x21, 0x31, 0, 216)) + bytes(216), "AF_UNIX"),
    (b"\r\n\r\n\x00\r\nQUIT\n" + bytes((0x21, 0x11, 0xff, 0xff)), "longer than"),
    (b"\r\n\r\nX", "did not start"),
])
def test_bad_headers_are_refused_naming_the_problem(data, problem):
    with pytest.raises(ProxyProtocolError, match=problem):
        parse(data)


# -- a server with a PROXY protocol listener ---------------------------------------------------


@pytest.fixture(scope="module")
def proxied(db_url, tmp_path_factory):
    """``ports[0]``: a plain listener; ``ports[1]``: a PROXY protocol listener for balancer 127.0.0.1."""
    proc = ServerProcess(db_url, str(tmp_path_factory.mktemp("proxied")), ["127.0.0.1:0"],
                         config={"rate_limit": 0, "proxy_protocol_listen": ["127.0.0.1:0"],
                                 "proxy_protocol_from": ["127.0.0.1/32"], "max_connections_per_source": 4})
    assert len(proc.ports) == 2 and "(PROXY protocol)" in proc.log()
    yield proc
    proc.stop()


def exchange(port: int, data: bytes, source: str = "127.0.0.1", requests: int = 1) -> list[bytes]:
    """Send ``data`` from ``source``; the answers (each head + body) until ``requests`` or EOF."""
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as sock:
        sock.sendall(data)
        received = b""
        answers: list[bytes] = []
        while len(answers) < requests:
            head_end = received.find(b"\r\n\r\n")
            if head_end >= 0:
                length = 0
                for line in received[:head_end].split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if len(received) >= head_end + 4 + length:
                    answers.append(received[:head_end + 4 + length])
                    received = received[head_end + 4 + length:]
                    continue
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                if received:
                    answers.append(received)
                break
            received += chunk
    return answers


def get(path: str, headers: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 169.254.169.254\r\n{headers}\r\n".encode()


def test_the_instance_named_by_the_header_is_the_one_served(proxied):
    a, b = new_address(), new_address()
    proxied.add(instance_id="i-pp-a", hostname="pp-a", addresses=[a])
    proxied.add(instance_id="i-pp-b", hostname="pp-b", addresses=[b])
    for encode in (encode_v1, encode_v2):
        for address, instance in ((a, "i-pp-a"), (b, "i-pp-b")):
            answers = exchange(proxied.ports[1], encode(address, 41000, "169.254.169.254", 80)
                               + get("/latest/meta-data/instance-id") + get("/latest/meta-data/hostname"),
                               requests=2)
            assert answers[0].startswith(b"HTTP/1.1 200") and answers[0].endswith(instance.encode())
            assert answers[1].endswith(instance.replace("i-", "").encode())
    # the plain listener still identifies by the connection's own source
    assert proxied.get("/latest/meta-data/instance-id", a).text == "i-pp-a"


def test_spoofed_headers_from_other_addresses_are_refused(proxied):
    victim, attacker = new_address(), new_address()
    proxied.add(instance_id="i-pp-victim", hostname="victim", addresses=[victim])
    proxied.add(instance_id="i-pp-attacker", hostname="attacker", addresses=[attacker])
    header = encode_v2(victim, 41000, "169.254.169.254", 80)
    answers = exchange(proxied.ports[1], header + get("/latest/meta-data/instance-id"), source=attacker)
    assert answers and answers[0].startswith(b"HTTP/1.1 403") and b"i-pp-victim" not in answers[0]
    assert b"load balancers (PROXY protocol)" in answers[0]
    # on the plain listener a PROXY header is just a malformed request, never an identity
    answers = exchange(proxied.ports[0], header + get("/latest/meta-data/instance-id"), source=attacker)
    assert answers[0].startswith(b"HTTP/1.1 400") and b"i-pp-victim" not in answers[0]
    # and a balancer connection without a header is refused, naming what is expected
    answers = exchange(proxied.ports[1], get("/latest/meta-data/instance-id"))
    assert answers[0].startswith(b"HTTP/1.1 400") and b"send-proxy-v2" in answers[0]
    metrics = proxied.admin("GET", "/metrics").text
    refused = [line for line in metrics.splitlines() if line.startswith("cloudseed_proxy_protocol_refused_total")]
    assert refused and float(refused[0].split()[-1]) >= 2


def test_local_health_checks_are_the_balancer_itself(proxied):
    local = b"\r\n\r\n\x00\r\nQUIT\n" + bytes((0x20, 0x00, 0, 0))
    answers = exchange(proxied.ports[1], local + get("/latest/meta-data/instance-id"))
    assert answers[0].startswith(b"HTTP/1.1 404") and b"no instance is registered" in answers[0]


def test_token_hop_limit_is_handed_to_the_balancer(proxied):
    address = new_address()
    proxied.add(instance_id="i-pp-token", hostname="token", addresses=[address], ec2={"hop_limit": 3})
    put = (b"PUT /latest/api/token HTTP/1.1\r\nHost: x\r\nX-aws-ec2-metadata-token-ttl-seconds: 60\r\n"
           b"Content-Length: 0\r\n\r\n")
    answer = exchange(proxied.ports[1], encode_v2(address, 1, "169.254.169.254", 80) + put)[0]
    assert answer.startswith(b"HTTP/1.1 200") and b"\r\nCloudseed-Hop-Limit: 3\r\n" in answer
    token = answer.split(b"\r\n\r\n", 1)[1].decode()
    answer = exchange(proxied.ports[1], encode_v2(address, 2, "169.254.169.254", 80)
                      + get("/latest/meta-data/instance-id", f"X-aws-ec2-metadata-token: {token}\r\n"))[0]
    assert answer.endswith(b"i-pp-token")
    # a forwarded token request is still refused: the header names the instance, not a proxy
    forwarded = put.replace(b"Content-Length", b"X-Forwarded-For: 10.9.9.9\r\nContent-Length")
    answer = exchange(proxied.ports[1], encode_v2(address, 3, "169.254.169.254", 80) + forwarded)[0]
    assert answer.startswith(b"HTTP/1.1 403")
    # the plain listener sets the IP TTL itself and sends no such header
    answer = exchange(proxied.ports[0], put, source=address)[0]
    assert answer.startswith(b"HTTP/1.1 200") and b"Cloudseed-Hop-Limit" not in answer


def test_per_source_caps_count_the_named_client(proxied):
    """The balancer is exempt; the instance it names is not (4 connections each here)."""
    address = new_address()
    proxied.add(instance_id="i-pp-cap", hostname="cap", addresses=[address])
    held = []
    try:
        for n in range(4):
            sock = socket.create_connection(("127.0.0.1", proxied.ports[1]), timeout=10)
            sock.sendall(encode_v2(address, 42000 + n, "169.254.169.254", 80))
            held.append(sock)
        other = new_address()
        proxied.add(instance_id="i-pp-cap-other", hostname="other", addresses=[other])
        assert exchange(proxied.ports[1], encode_v2(other, 1, "169.254.169.254", 80)
                        + get("/latest/meta-data/instance-id"))[0].endswith(b"i-pp-cap-other")
        for _ in range(50):  # the server has read the four headers once the fifth is refused
            answer = exchange(proxied.ports[1], encode_v2(address, 1, "169.254.169.254", 80)
                              + get("/latest/meta-data/instance-id"))[0]
            if answer.startswith(b"HTTP/1.1 503"):
                break
        assert answer.startswith(b"HTTP/1.1 503") and f"too many connections from {address}".encode() in answer
    finally:
        for sock in held:
            sock.close()


def test_the_setting_needs_its_balancers(tmp_path):
    from cloudseed.provider.server.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="proxy_protocol_listen needs proxy_protocol_from"):
        load_config(None, {"proxy_protocol_listen": ["127.0.0.1:8000"]})
    with pytest.raises(ConfigError, match="proxy_protocol_from: .*does not appear to be"):
        load_config(None, {"proxy_protocol_listen": ["127.0.0.1:8000"], "proxy_protocol_from": ["balancer"]})
    config = load_config(None, {"listen": [], "proxy_protocol_listen": ["10.0.0.2:8000=net-a"],
                                "proxy_protocol_from": ["10.0.0.1"]})
    assert config.proxy_protocol_listen[0].network == "net-a" and str(config.proxy_protocol_from[0]) == "10.0.0.1/32"
    with pytest.raises(ConfigError, match="nothing to serve"):
        load_config(None, {"listen": []})
