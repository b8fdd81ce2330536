"""Standing abuse checks of the server's identity rules (issue 16 items 1, 4, 5, 7; issue 12 item 12).

Each test replays one finding against a real ``cloudseed serve`` on loopback (SQLite registry:
the rules are the same over PostgreSQL): requiring IMDSv2 holds on every API, every token sent is
checked, a proxy without ``X-Forwarded-For`` does not put every instance in one rate-limit
bucket, every file a command creates is private, an IPv4-mapped IPv6 address is the IPv4
address, admin paging with absurd numbers is a 400, and unknown sources do not grow memory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import hmac
import os
import stat
import subprocess
import sys

import pytest

from tests.provider.server.server_support import PROXY_SECRET, ROOT, ServerProcess, http, new_address

# every API that serves an instance's data; "POST" entries are writes
DATA_PATHS = [
    ("GET", "/latest/meta-data/instance-id"), ("GET", "/latest/user-data"), ("GET", "/"),
    ("GET", "/2009-04-04/meta-data/"), ("GET", "/latest/dynamic/instance-identity/document"),
    ("GET", "/openstack"), ("GET", "/openstack/latest"), ("GET", "/openstack/latest/meta_data.json"),
    ("GET", "/openstack/latest/user_data"), ("GET", "/openstack/latest/network_data.json"),
    ("GET", "/openstack/latest/vendor_data.json"), ("GET", "/openstack/2013-04-04/password"),
    ("GET", "/openstack/latest/password"), ("HEAD", "/openstack/latest/user_data"),
    ("GET", "/nocloud"), ("GET", "/nocloud/meta-data"), ("GET", "/nocloud/user-data"),
    ("GET", "/nocloud/network-config"), ("POST", "/openstack/latest/password"), ("POST", "/phone-home"),
]
SECRET = "user-data-secret-7f3a"


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _sign(instance_id: str) -> str:
    return hmac.new(PROXY_SECRET.encode(), instance_id.encode(), hashlib.sha256).hexdigest()


@pytest.fixture(scope="module")
def direct(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("direct")
    proc = ServerProcess(str(tmp / "server.db"), str(tmp / "run"), ["127.0.0.1:0"], config={"rate_limit": 0})
    yield proc
    proc.stop()


def _token(server: ServerProcess, address: str) -> str:
    reply = server.get("/latest/api/token", address, method="PUT",
                       headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    assert reply.status == 200, reply.text
    return reply.text


def _refused_everywhere(server: ServerProcess, address: str, headers: dict, instance_id: str) -> None:
    for method, path in DATA_PATHS + [("GET", f"/nocloud/{instance_id}/user-data")]:
        for _ in range(2):  # the second request takes the remembered-route path
            reply = server.get(path, address, method=method, headers=headers,
                               body=b"pw" if method == "POST" else None)
            assert reply.status == 401, (method, path, headers, reply.status, reply.body)
            assert SECRET.encode() not in reply.body


def test_required_tokens_hold_on_every_api(direct):
    address = new_address()
    direct.add(instance_id="i-req", hostname="req", addresses=[address], user_data=SECRET,
               imds_tokens="required")
    _refused_everywhere(direct, address, {}, "i-req")
    token = {"X-aws-ec2-metadata-token": _token(direct, address)}
    assert direct.get("/openstack/latest/user_data", address, headers=token).text == SECRET
    assert direct.get("/nocloud/user-data", address, headers=token).text == SECRET
    assert direct.get("/latest/user-data", address, headers=token).text == SECRET
    assert direct.get("/openstack/latest/password", address, method="POST", headers=token,
                      body=b"pw").status == 200
    assert direct.get("/openstack/latest/password", address, headers=token).text == "pw"


def test_every_token_sent_is_checked_on_every_api(direct):
    address, other = new_address(), new_address()
    direct.add(instance_id="i-opt", hostname="opt", addresses=[address], user_data=SECRET)
    direct.add(instance_id="i-opt-2", hostname="opt2", addresses=[other])
    assert direct.get("/openstack/latest/user_data", address).text == SECRET  # IMDSv1 allowed here
    foreign = _token(direct, other)
    for bad in ("garbage", "", "a.b", foreign, _token(direct, address)[:-1] + "x"):
        _refused_everywhere(direct, address, {"X-aws-ec2-metadata-token": bad}, "i-opt")


def test_a_token_with_non_ascii_bytes_is_a_401_not_a_crash(direct):
    import socket

    address = new_address()
    direct.add(instance_id="i-bytes", hostname="bytes", addresses=[address], user_data=SECRET)
    token = _token(direct, address)
    for path in ("/latest/user-data", "/openstack/latest/user_data", "/nocloud/user-data"):
        with socket.create_connection(("127.0.0.1", direct.port), timeout=10, source_address=(address, 0)) as conn:
            conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                         f"X-aws-ec2-metadata-token: {token[:-1]}".encode() + b"\xe9\r\n\r\n")
            reply = b""
            while chunk := conn.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 401"), (path, reply[:200])
        assert SECRET.encode() not in reply


def test_token_ttl_that_is_not_plain_digits_is_a_400(direct):
    address = new_address()
    direct.add(instance_id="i-ttl", hostname="ttl", addresses=[address])
    for ttl in ("\u00b2".encode().decode("latin-1"), "9" * 5000, "0x10", "1e3", " 60 0"):
        reply = direct.get("/latest/api/token", address, method="PUT",
                           headers={"X-aws-ec2-metadata-token-ttl-seconds": ttl})
        assert reply.status == 400 and "1 to 21600" in reply.text, (ttl[:10], reply.status)


def test_address_prefix_that_is_not_plain_digits_is_a_record_error():
    from cloudseed.provider.registry import RecordError, parse_address_spec

    for spec in ("10.0.0.5/\u00b2", "10.0.0.5/\u0663", "10.0.0.5/" + "9" * 5000):
        with pytest.raises(RecordError):
            parse_address_spec(spec)


def test_server_wide_required_tokens_hold_on_every_api(tmp_path):
    proc = ServerProcess(str(tmp_path / "server.db"), str(tmp_path / "run"), ["127.0.0.1:0"],
                         config={"rate_limit": 0, "imds_tokens": "required"})
    try:
        address = new_address()
        proc.add(instance_id="i-srv-req", hostname="srvreq", addresses=[address], user_data=SECRET)
        _refused_everywhere(proc, address, {}, "i-srv-req")
        token = {"X-aws-ec2-metadata-token": _token(proc, address)}
        assert proc.get("/openstack/latest/meta_data.json", address, headers=token).json()["uuid"] == "i-srv-req"
    finally:
        proc.stop()


def test_rate_limit_behind_a_proxy_is_per_instance(tmp_path):
    """A proxy that sends no X-Forwarded-For: each identified instance still has its own bucket."""
    proc = ServerProcess(str(tmp_path / "server.db"), str(tmp_path / "run"), ["127.0.0.1:0"],
                         config={"proxies": ["127.0.0.2/32"], "proxy_shared_secret": PROXY_SECRET,
                                 "rate_limit": 1, "rate_burst": 4})
    try:
        for name in ("i-noisy", "i-quiet"):
            proc.add(instance_id=name, hostname=name[2:], addresses=[{"address": "10.9.0.1", "network": name}])

        def ask(instance_id: str) -> int:
            headers = {"X-Instance-ID": instance_id, "X-Instance-ID-Signature": _sign(instance_id)}
            return proc.get("/latest/meta-data/instance-id", "127.0.0.2", headers=headers).status

        statuses = [ask("i-noisy") for _ in range(8)]
        assert statuses[:4] == [200] * 4 and statuses[-1] == 429
        assert [ask("i-quiet") for _ in range(3)] == [200] * 3
        # unsigned claims do not get buckets of their own: they share the proxy's
        unsigned = [proc.get("/latest/meta-data/instance-id", "127.0.0.2",
                             headers={"X-Instance-ID": f"i-made-up-{n}", "X-Instance-ID-Signature": "0" * 64}).status
                    for n in range(8)]
        assert 429 in unsigned and set(unsigned) <= {403, 429}
    finally:
        proc.stop()


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "cloudseed", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _assert_private(directory: str) -> None:
    names = sorted(os.listdir(directory))
    assert any(n.endswith(".db") for n in names), names
    for name in names:  # the registry, its WAL files, the access log, a seed image
        path = os.path.join(directory, name)
        expected = 0o640 if name.endswith(".log") else 0o600
        assert _mode(path) & 0o777 == expected, (name, oct(_mode(path)))


def test_files_are_private_whichever_command_creates_them(tmp_path):
    old = os.umask(0o022)  # the usual umask: the commands must not rely on a stricter one
    try:
        added = tmp_path / "added"
        _cli("instances", "--db", str(added / "r.db"), "add", "--id", "i-m", "--hostname", "m",
             "--address", "10.0.0.5")
        _assert_private(str(added))
        assert _mode(str(added)) == 0o700  # the directory it made for the registry
        seeded = tmp_path / "seeded"
        built = _cli("seed", "build", "--db", str(seeded / "r.db"), "--instance", "i-m", "-o",
                     str(tmp_path / "seed.iso"), check=False)
        assert built.returncode == 2 and "no registry database at" in built.stderr
        assert not seeded.exists()  # a seed build never creates a registry
        # a database an older release left readable by everyone (with its WAL files)
        os.makedirs(seeded)
        os.rename(added / "r.db", seeded / "r.db")
        for name in ("r.db", "r.db-wal", "r.db-shm"):
            (seeded / name).touch()
            os.chmod(seeded / name, 0o644)
        _cli("seed", "build", "--kind", "configdrive", "--db", str(seeded / "r.db"), "--instance", "i-m",
             "-o", str(seeded / "seed.iso"))
        _assert_private(str(seeded))
        served = tmp_path / "served"
        os.makedirs(served)
        proc = ServerProcess(str(served / "r.db"), str(tmp_path / "run"), ["127.0.0.1:0"])
        try:
            proc.add(instance_id="i-s", hostname="s", addresses=[new_address()], user_data=SECRET)
            assert os.path.exists(str(served / "r.db-wal"))  # the server is running: its WAL is there
            _assert_private(str(served))
        finally:
            proc.stop()
    finally:
        os.umask(old)


def test_ipv4_mapped_address_is_the_ipv4_address(direct):
    address = "10.77.0.9"
    direct.add(instance_id="i-v4", hostname="v4", addresses=[{"address": address, "network": "nv4"}])
    reply = direct.admin("POST", "/v1/instances", {"instance_id": "i-mapped", "hostname": "mapped",
                                                    "addresses": [{"address": f"::ffff:{address}", "network": "nv4"}]})
    assert reply.status == 409 and "already used by instance i-v4" in reply.text
    added = direct.add(instance_id="i-mapped-2", hostname="mapped2",
                       addresses=[{"address": "::ffff:10.77.0.10", "network": "nv4"}])
    assert added["addresses"][0]["address"] == "10.77.0.10"


@pytest.mark.parametrize("query", ["offset=" + "9" * 40, "limit=" + "9" * 40, "offset=-1",
                                   "offset=%C2%B2", "limit=%D9%A3"])  # superscript two, Arabic-Indic three
def test_admin_paging_with_absurd_numbers_is_a_400(direct, query):
    reply = direct.admin("GET", "/v1/instances?" + query)
    assert reply.status == 400, (reply.status, reply.text)
    assert reply.json()["field"] == query.split("=")[0]


def test_unknown_sources_do_not_grow_the_cache_without_bound(tmp_path, monkeypatch):
    from cloudseed.provider.registry import open_registry
    from cloudseed.provider.server import instance_cache

    monkeypatch.setattr(instance_cache, "MAX_UNKNOWN_ADDRESSES", 50)
    registry = open_registry(str(tmp_path / "r.db"))
    executor = concurrent.futures.ThreadPoolExecutor(1)
    try:
        cache = instance_cache.InstanceCache(registry, executor)

        async def probe() -> None:
            for n in range(400):
                assert await cache.by_address(None, f"10.200.{n // 250}.{n % 250}") is None

        asyncio.run(probe())
        assert len(cache.addresses) <= 50
    finally:
        executor.shutdown()
        registry.close()


def test_no_token_needed_where_none_is_required(direct):
    """Sanity: a known instance still answers without any token where none is required."""
    address = new_address()
    direct.add(instance_id="i-plain", hostname="plain", addresses=[address])
    assert http(direct.port, "/openstack/latest/meta_data.json", source=address).json()["uuid"] == "i-plain"


def test_mutated_and_random_tokens_are_refused_never_crash():
    """Every token sent is checked: 20,000 mutations of a valid token and random strings are each
    a TokenError(401) for the owner (only the untouched token passes), never another exception."""
    import random

    from cloudseed.provider.server.imds_tokens import TokenError, TokenIssuer

    issuer = TokenIssuer(b"k" * 32)
    good = issuer.issue("i-owner", 60)
    issuer.check(good, "i-owner")
    rng = random.Random(16)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \u00e9\u00b2"
    for n in range(20_000):
        if n % 2:
            chars = list(good)
            for _ in range(rng.randint(1, 3)):
                chars[rng.randrange(len(chars))] = rng.choice(alphabet)
            token = "".join(chars)
        else:
            token = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        if token == good:
            continue
        with pytest.raises(TokenError) as refused:
            issuer.check(token, "i-owner")
        assert refused.value.status == 401

