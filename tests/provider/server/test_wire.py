"""The wire parser (cloudseed/provider/server/engine/wire.py) on its own: bytes in, requests out, no I/O.

Every case is fed whole, byte by byte, and in random splits: the requests that come out must be
the same, because a client may send a request in any number of TCP segments.
"""

from __future__ import annotations

import random

import pytest

from cloudseed.provider.server.engine.wire import MAX_HEAD, RequestParser, WireError


def parse_all(data: bytes, chunks: list[int], max_body: int = 1024) -> list:
    """The (method, path, query, version, headers, keep_alive, body) of every request, and the
    WireError (status, message) that ended them, if one did, feeding ``data`` in ``chunks``."""
    parser = RequestParser(max_body)
    found: list = []
    position = 0
    for size in chunks + [len(data)]:
        parser.feed(data[position:position + size])
        position += size
        try:
            while (item := parser.next()) is not None:
                head, body = item
                found.append((head.method, head.path, head.query, head.version, dict(head.headers),
                              head.keep_alive, body))
        except WireError as error:
            found.append(("error", error.status, str(error)))
            break
        if position >= len(data):
            break
    return found


def splits(data: bytes) -> list[list[int]]:
    rng = random.Random(len(data))
    ways = [[len(data)], [1] * len(data)]
    for _ in range(5):
        cuts, left = [], len(data)
        while left > 0:
            cuts.append(rng.randint(1, max(1, min(left, 40))))
            left -= cuts[-1]
        ways.append(cuts)
    return ways


def same_every_way(data: bytes, max_body: int = 1024) -> list:
    results = [parse_all(data, way, max_body) for way in splits(data)]
    for other in results[1:]:
        assert other == results[0]
    return results[0]


def test_one_request_whole_and_byte_by_byte():
    found = same_every_way(b"GET /latest/meta-data/instance-id?x=1 HTTP/1.1\r\nHost: 169.254.169.254\r\n"
                           b"X-Aws-Ec2-Metadata-Token: abc\r\n\r\n")
    assert found == [("GET", "/latest/meta-data/instance-id", "x=1", "HTTP/1.1",
                      {"host": "169.254.169.254", "x-aws-ec2-metadata-token": "abc"}, True, b"")]


def test_pipelined_requests_with_bodies_and_keep_alive_rules():
    data = (b"PUT /latest/api/token HTTP/1.1\r\nX-aws-ec2-metadata-token-ttl-seconds: 60\r\n\r\n"
            b"POST /openstack/latest/password HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
            b"GET /a%20b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
            b"GET /c HTTP/1.1\r\nAccept: a\r\nAccept: b\r\nConnection: close\r\n\r\n")
    found = same_every_way(data)
    assert [f[:2] for f in found] == [("PUT", "/latest/api/token"), ("POST", "/openstack/latest/password"),
                                      ("GET", "/a b"), ("GET", "/c")]
    assert found[1][6] == b"hello"
    assert [f[5] for f in found] == [True, True, True, False]
    assert found[3][4]["accept"] == "a, b"
    assert same_every_way(b"GET / HTTP/1.0\r\n\r\n")[0][5] is False


@pytest.mark.parametrize("raw, status, words", [
    (b"GARBAGE\r\n\r\n", 400, "malformed request line"),
    (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400, "malformed header line"),
    (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400, "Content-Length"),
    (b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "Content-Length"),
    (b"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", 400, "malformed header line"),
    (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 411, "chunked"),
    (b"GET / HTTP/2.0\r\n\r\n", 505, "HTTP/2.0"),
    (b"GET http://evil/ HTTP/1.1\r\n\r\n", 400, "must start with /"),
    (b"GET / HTTP/1.1\n\n", 400, "malformed"),  # bare LF: refused
    (b"GET /a22b=\n\r\n\n\r\n\r\n", 400, "CRLF"),  # found by the fuzzer: 505 whole, 400 in pieces
    (b"GET / HTTP/1.1\r\nX: " + b"a" * MAX_HEAD + b"\r\n\r\n", 431, "larger than"),
    (b"POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000, 413, "exceeds the limit of 1024"),
])
def test_malformed_requests_are_refused_naming_the_problem(raw, status, words):
    found = same_every_way(raw)
    assert found[-1][:2] == ("error", status) and words in found[-1][2], found


def test_a_request_before_a_malformed_one_is_still_returned():
    found = same_every_way(b"GET /ok HTTP/1.1\r\n\r\nBAD\r\n\r\n")
    assert found[0][1] == "/ok" and found[1][:2] == ("error", 400)


def test_an_error_is_final():
    parser = RequestParser(100)
    parser.feed(b"BAD\r\n\r\nGET / HTTP/1.1\r\n\r\n")
    for _ in range(2):
        with pytest.raises(WireError):
            parser.next()


def test_partial_input_waits_and_counts_as_buffered():
    parser = RequestParser(100)
    parser.feed(b"GET / HTTP/1.1\r\nHost: x\r\n")
    assert parser.next() is None and parser.buffered == 25
    parser.feed(b"\r\nGET /b")
    assert parser.next()[0].path == "/"
    assert parser.next() is None and parser.buffered == 6


def test_an_oversized_body_is_read_away_before_the_413():
    parser = RequestParser(10)
    parser.feed(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n" + b"x" * 40)
    assert parser.next() is None and parser.buffered == 0  # still reading it away
    parser.feed(b"x" * 60)
    with pytest.raises(WireError) as error:
        parser.next()
    assert error.value.status == 413


def test_a_repeated_head_gives_the_same_answer_as_a_new_one():
    raw = b"GET /repeat HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    first, second = parse_all(raw, [len(raw)]), parse_all(raw, [len(raw)])  # second from the memo
    assert first == second and first[0][5] is False


def test_a_head_seen_before_that_arrived_in_pieces_leaves_no_stale_scan_position():
    # found by fuzz_wire: a head that ends a read and was seen before is taken from the memo;
    # the search for the next head's end must start at that head's own start, or a malformed
    # pipelined request (or the end of a valid one) is looked for past where it is
    known = b"GET /seen HTTP/1.1\r\nHost: x\r\n\r\n"
    parse_all(known, [len(known)])  # now in the memo
    parser = RequestParser(1024)
    for piece in (known[:10], known[10:]):  # scanned partly, then completed: taken from the memo
        parser.feed(piece)
        item = parser.next()
    assert item is not None and item[0].target == "/seen"
    parser.feed(b"bad\r\n\r\n")
    with pytest.raises(WireError) as refused:
        parser.next()
    assert refused.value.status == 400
