"""#include and #include-once against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import gzip
import os
import socket
import time

import pytest

from cloudseed.agent.userdata import process_userdata
from cloudseed.agent.userdata.includes import cache_file_name
from tests.agent.userdata.userdata_http import IncludeServer

FILES = {
    "/cfg": b"#cloud-config\nincluded: true\n",
    "/script": b"#!/bin/sh\necho included\n",
    "/gz": gzip.compress(b"#cloud-config\nfrom_gzip: 1\n"),
    "/once": b"#cloud-config\nonce: 1\n",
}


@pytest.fixture
def server():
    with IncludeServer(FILES, delay=3.0) as srv:
        yield srv


def test_include_fetches_each_url(server):
    r = process_userdata(f"#include\n{server.url}/cfg\n{server.url}/script\n", fetch_retries=0)
    assert r.errors == []
    assert r.cloud_config == {"included": True}
    assert [(p.name, p.content) for p in r.scripts] == [("part-002", FILES["/script"])]


def test_include_on_the_same_line_and_gzip_content(server):
    r = process_userdata(f"#include {server.url}/gz\n")
    assert r.cloud_config == {"from_gzip": 1}


def test_include_once_fetches_once_then_uses_cache(server, tmp_path):
    cache = str(tmp_path / "cache")
    for _ in range(3):
        r = process_userdata(f"#include-once\n{server.url}/once\n", include_cache_dir=cache)
        assert r.cloud_config == {"once": 1} and r.errors == []
    assert server.hits["/once"] == 1
    cached = os.path.join(cache, cache_file_name(f"{server.url}/once"))
    assert os.stat(cached).st_mode & 0o777 == 0o600


def test_plain_include_is_fetched_every_time(server, tmp_path):
    for _ in range(2):
        process_userdata(f"#include\n{server.url}/cfg\n", include_cache_dir=str(tmp_path))
    assert server.hits["/cfg"] == 2


def test_404_is_an_error_naming_the_url_and_the_rest_goes_on(server):
    r = process_userdata(f"#include\n{server.url}/missing\n{server.url}/cfg\n")
    assert r.cloud_config == {"included": True}
    assert len(r.errors) == 1
    assert "/missing" in r.errors[0] and "404" in r.errors[0] and "line 2" in r.errors[0]
    assert server.hits["/missing"] == 1          # a 4xx is not retried


def test_timeout_is_bounded(server):
    start = time.monotonic()
    r = process_userdata(f"#include\n{server.url}/slow/cfg\n", fetch_timeout=0.5, fetch_retries=1)
    assert time.monotonic() - start < 2.9
    assert r.cloud_config is None
    assert "timed out" in r.errors[0] and "/slow/cfg" in r.errors[0]


def test_unreachable_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]          # bound, never listening: connection refused
        r = process_userdata(f"#include http://127.0.0.1:{port}/x\n", fetch_timeout=1, fetch_retries=1)
    assert r.cloud_config is None
    assert f"127.0.0.1:{port}/x" in r.errors[0]


def test_includes_can_be_disabled(server):
    r = process_userdata(f"#include\n{server.url}/cfg\n", allow_includes=False)
    assert r.cloud_config is None and server.hits["/cfg"] == 0
    assert "disabled" in r.errors[0]


def test_include_loop_stops(server):
    server.files["/loop"] = f"#include {server.url}/loop\n".encode()
    r = process_userdata(f"#include {server.url}/loop\n")
    assert any("nested deeper" in e for e in r.errors)


def test_mime_include_url_part(server):
    blob = (f'Content-Type: multipart/mixed; boundary="B"\nMIME-Version: 1.0\n\n'
            f"--B\nContent-Type: text/x-include-url\n\n{server.url}/script\n"
            f"--B\nContent-Type: text/cloud-config\n\n#cloud-config\nafter: 1\n--B--\n")
    r = process_userdata(blob)
    assert [p.name for p in r.scripts] == ["part-001"]
    assert r.cloud_config == {"after": 1}


def test_file_url(tmp_path):
    path = tmp_path / "local.cfg"
    path.write_bytes(b"#cloud-config\nlocal: 1\n")
    assert process_userdata(f"#include file://{path}\n").cloud_config == {"local": 1}
