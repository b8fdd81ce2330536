"""Differential fuzzing of the server's C fast path: the same client byte streams to a server with it and one without.

    .venv/bin/python tests/fuzz/fast_path_streams.py --seed 7 --seconds 600   # long run
    .venv/bin/python tests/fuzz/fast_path_streams.py --replay FILE            # one stream again

tests/fuzz/test_fuzz_fast_path.py runs the fixed seeds (tests/fuzz/seeds/fast_path) and a short
run with a fixed seed. Each case is a stream of sends (a mutated valid head: a byte changed,
removed or duplicated, headers reordered or re-cased, bare LF, NUL, long paths, percent-encoding,
dot segments, query, fragment, pipelined pairs, a head split over several sends, a body,
Transfer-Encoding, Connection: close, HTTP/1.0, HEAD), sent from an instance's address that both
servers have already answered from its cached routes (so C holds its routes and header lines),
on a new connection and on one kept alive after a first answer (which C holds). After the
stream a sentinel GET tells whether the connection stayed usable (unless the stream ends with an
empty send: then the client closes right after it); then the client closes its side. The
answers (Date-like fields and meta_data.json's random seed aside) and how the connection ended
must be the same.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import socket
import sys
import time

PATHS = ["/latest/meta-data/hostname", "/latest/meta-data/", "/latest/meta-data/instance-id", "/latest/user-data",
         "/openstack", "/openstack/2018-08-27/meta_data.json", "/latest/meta-data/local-ipv4",
         "/latest/meta-data/nothing-here"]
HEADERS = [b"Host: 169.254.169.254", b"User-Agent: Cloud-Init/22.4", b"Accept-Encoding: gzip, deflate",
           b"Accept: */*", b"Connection: keep-alive"]
SENTINEL = (b"GET /latest/meta-data/public-keys/0/openssh-key HTTP/1.1\r\n"
            + b"".join(h + b"\r\n" for h in HEADERS) + b"\r\n")
DATE_LIKE = re.compile(rb"^(date|last-modified|expires|age): [^\r\n]*\r\n", re.I | re.M)
SEED = re.compile(rb'"random_seed": "[^"]*"')  # meta_data.json's, fresh in every answer (C calls its factory)
PLAIN = b"ABCZabcz09-._~/:@!$&'()*+,;="
SEPARATOR = b"\n--send--\n"  # between the sends of a stream in a seed file


def head(path: str | bytes = "/latest/meta-data/hostname", method: bytes = b"GET", version: bytes = b"HTTP/1.1",
         headers: list[bytes] | None = None, eol: bytes = b"\r\n") -> bytes:
    path = path.encode() if isinstance(path, str) else path
    lines = [method + b" " + path + b" " + version] + (HEADERS if headers is None else headers)
    return b"".join(line + eol for line in lines) + eol


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    position = rng.randrange(len(data))
    kind = rng.randrange(3)
    if kind == 0:
        return data[:position] + bytes([rng.randrange(256)]) + data[position + 1:]
    if kind == 1:
        return data[:position] + data[position + 1:]
    return data[:position] + data[position:position + 1] * 2 + data[position + 1:]


def _long_path(rng: random.Random) -> bytes:
    size = rng.choice([254, 255, 256, 257, 258, 1024, 8191, 8192, 8193, 70000])
    stem = b"/latest/meta-data/"
    return (stem + b"a" * size)[:size] if rng.randrange(2) else (b"/" * size)


def case(rng: random.Random) -> list[bytes]:
    """One stream: the list of sends."""
    path = rng.choice(PATHS).encode()
    headers = list(HEADERS)
    kind = rng.randrange(21)
    if kind == 0:
        data = _mutate_bytes(rng, head(path))
    elif kind == 1:
        rng.shuffle(headers)
        data = head(path, headers=headers)
    elif kind == 2:
        index = rng.randrange(len(headers))
        name, _, value = headers[index].partition(b":")
        headers[index] = bytes(c ^ 0x20 if chr(c).isalpha() and rng.randrange(2) else c for c in name) + b":" + value
        data = head(path, headers=headers)
    elif kind == 3:
        index = rng.randrange(len(headers))
        name, _, value = headers[index].partition(b":")
        headers[index] = name + rng.choice([b" :", b":  ", b":\t", b":"]) + value + rng.choice([b" ", b"\t", b""])
        data = head(path, headers=headers)
    elif kind == 4:
        data = head(path, eol=b"\n") if rng.randrange(2) else head(path).replace(b"\r\n", b"\n", 1)
    elif kind == 5:
        data = head(path)
        position = rng.randrange(len(data))
        data = data[:position] + b"\0" + data[position:]
    elif kind == 6:
        data = head(_long_path(rng))
    elif kind == 7:
        encoded = rng.choice([b"/latest/meta-data/host%6eame", b"/latest%2Fmeta-data/hostname", b"/%6catest/user-data",
                              b"/latest/meta-data/%", b"/latest/meta-data/%zz", b"/latest/meta-data/%00"])
        data = head(encoded)
    elif kind == 8:
        dotted = rng.choice([b"/latest/../latest/meta-data/hostname", b"/latest/./meta-data/hostname", b"/..",
                             b"/latest/meta-data/hostname/..", b"//latest/meta-data/hostname",
                             b"/latest/meta-data//hostname", b"/latest/meta-data/hostname/"])
        data = head(dotted)
    elif kind == 9:
        data = head(path + rng.choice([b"?", b"?a=b", b"#", b"#frag", b"?#"]))
    elif kind == 10:
        other = head(rng.choice(PATHS))
        data = head(path) + (other if rng.randrange(3) else _mutate_bytes(rng, other))
    elif kind == 11:
        data = head(path, headers=headers + [b"Content-Length: 5"]) + b"hello"
    elif kind == 12:
        data = head(path, headers=headers + [b"Transfer-Encoding: chunked"]) + b"5\r\nhello\r\n0\r\n\r\n"
    elif kind == 13:
        data = head(path, headers=[h for h in headers if not h.startswith(b"Connection")] + [b"Connection: close"])
    elif kind == 14:
        data = head(path, version=b"HTTP/1.0", headers=headers if rng.randrange(2) else headers[:-1])
    elif kind == 15:
        data = head(path, method=b"HEAD")
    elif kind == 16:
        data = head(path, headers=headers + [b"X-aws-ec2-metadata-token: abc"])
    elif kind == 19:
        data = head(path, headers=headers[:rng.randrange(len(headers))])
    elif kind == 17 and rng.randrange(2):  # characters C takes as plain in a path, anywhere in it
        position = rng.randrange(1, len(path) + 1)
        data = head(path[:position] + bytes([rng.choice(PLAIN)]) * rng.randrange(1, 3) + path[position:])
    elif kind == 18:
        data = head(path)  # a head (whole or cut short), then the client's close with no sentinel
        return [data[:rng.randrange(1, len(data) + 1)], b""]
    else:
        data = head(path)
        for _ in range(rng.randrange(1, 4)):
            data = _mutate_bytes(rng, data)
    return split(rng, data)


def split(rng: random.Random, data: bytes) -> list[bytes]:
    """The stream as one send, or cut at one offset or a few."""
    if len(data) < 2 or rng.randrange(3) == 0:
        return [data]
    cuts = sorted({rng.randrange(1, len(data)) for _ in range(rng.choice([1, 1, 2, 3]))})
    return [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]


def every_offset_cases() -> list[list[bytes]]:
    """The valid head split in two at every offset, and each byte of it removed, doubled, made a NUL."""
    data = head()
    cases = [[data[:cut], data[cut:]] for cut in range(1, len(data))]
    for position in range(len(data)):
        cases.append([data[:position] + data[position + 1:]])
        cases.append([data[:position] + data[position:position + 1] * 2 + data[position + 1:]])
        cases.append([data[:position] + b"\0" + data[position + 1:]])
    return cases


def _read(sock: socket.socket, until: bytes | None) -> tuple[bytes, str]:
    """What comes until ``until`` was read ("answered"), the server closed ("closed"), or it went
    quiet for a second ("quiet"); ``until`` None: until the server closes."""
    data = b""
    sock.settimeout(1 if until else 5)
    while until is None or until not in data:
        try:
            more = sock.recv(65536)
        except ConnectionResetError:  # the server closed with something unread: its close
            return data, "closed"
        except TimeoutError:
            return data, "quiet"
        if not more:
            return data, "closed"
        data += more
    return data, "answered"


def exchange(port: int, source: str, sends: list[bytes], held: bool) -> tuple[bytes, str]:
    """What the server sends back to ``sends`` then the sentinel, and whether the sentinel was
    answered; then the client closes its side and reads what is left. The client waits for the
    sentinel's answer before it closes: a server closes on the client's FIN without answering
    what it had not answered yet, and when that FIN is read is the scheduler's business."""
    mark = b"AAAA i-" + source.replace(".", "-").encode()  # in the sentinel's answer only
    with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if held:  # a first answer: the connection is then C's on the fast server
            sock.sendall(SENTINEL)
            first, ending = _read(sock, mark)
            assert ending == "answered", (first, ending)
        data, ending = b"", "closed"
        try:
            for index, piece in enumerate(sends):
                if index:
                    time.sleep(0.002)  # its own read on the server
                sock.sendall(piece)
            close_now = sends[-1:] == [b""]  # an empty last send: the close right after the stream
            if not close_now:
                time.sleep(0.002)
                sock.sendall(SENTINEL)
                data, ending = _read(sock, mark)
            if close_now or ending != "closed":
                sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server closed first (reset, not connected any more): its answers are read
            pass
        rest, _ = _read(sock, None)
    return SEED.sub(b'"random_seed": ""', DATE_LIKE.sub(b"", data + rest)), ending


def compare(ports: dict, source: str, sends: list[bytes]) -> str | None:
    """None when both servers answered alike (new connection and held one), else what differed."""
    for held in (False, True):
        fast, python = (exchange(ports[side], source, sends, held) for side in (True, False))
        if fast != python:
            return f"held={held}\nfast:   {fast!r}\npython: {python!r}"
    return None


def save_seed(directory: str, sends: list[bytes]) -> str:
    os.makedirs(directory, exist_ok=True)
    data = SEPARATOR.join(sends)
    path = os.path.join(directory, f"stream-{hashlib.sha256(data).hexdigest()[:12]}.bin")
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def load_seed(path: str) -> list[bytes]:
    with open(path, "rb") as handle:
        return handle.read().split(SEPARATOR)


def main() -> int:
    # run as a script, not by pytest: this checkout's tests and cloudseed first
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from tests.fuzz.fast_path_pair import ServerPair

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--replay", help="one seed file instead of random streams")
    parser.add_argument("--failures", default="fast-path-failures", help="where failing streams are written")
    args = parser.parse_args()
    with ServerPair() as pair:
        if args.replay:
            failure = compare(pair.ports, pair.source, load_seed(args.replay))
            print(failure or "same answers")
            return 1 if failure else 0
        rng = random.Random(args.seed)
        deadline = time.monotonic() + args.seconds
        runs = failures = 0
        while time.monotonic() < deadline:
            sends = case(rng)
            failure = compare(pair.ports, pair.source, sends)
            runs += 1
            if failure:
                failures += 1
                print(save_seed(args.failures, sends), failure, sep="\n")
        alive = pair.alive()
        print(f"{runs} streams, {failures} differing; fast-path server alive: {alive}")
        return 0 if not failures and alive else 1


if __name__ == "__main__":
    sys.exit(main())
