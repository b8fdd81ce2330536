"""Coverage-guided fuzzing of the server's request parser (cloudseed/provider/server/engine/wire.py) with atheris.

    .venv/bin/python tests/fuzz/fuzz_wire.py -runs=20000 DIR          # short run (test_fuzz_wire.py)
    .venv/bin/python tests/fuzz/fuzz_wire.py -max_total_time=600 DIR  # long run (figure in the docs)

DIR is a corpus directory libFuzzer reads and adds to: start from a copy of tests/fuzz/seeds/wire.
Each input is a byte stream from a client. Besides "no crash", every input must hold:

* the parser raises nothing but ``WireError``, with a 4xx/5xx status;
* the same stream fed whole and cut into pieces (cut points taken from the input) gives the
  same requests and the same error: TCP may split a request anywhere;
* every request it returns has a target starting with ``/``, HTTP/1.0 or 1.1, lower-case header
  names, and a body of exactly its Content-Length; nothing stays buffered beyond the head and
  body limits.
"""

from __future__ import annotations

import os
import sys

import atheris

# run as a script under atheris, not by pytest: this checkout first, even from a Python without it installed
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

with atheris.instrument_imports():
    from cloudseed.provider.server.engine.wire import MAX_HEAD, RequestParser, WireError

MAX_BODY = 256


def parse(data: bytes, cuts: list[int]) -> list:
    parser = RequestParser(MAX_BODY)
    found: list = []
    position = 0
    for cut in cuts + [len(data)]:
        parser.feed(data[position:cut])
        position = max(position, cut)
        try:
            while (item := parser.next()) is not None:
                head, body = item
                assert head.target.startswith("/"), head.target
                assert head.version in ("HTTP/1.0", "HTTP/1.1"), head.version
                assert all(name == name.lower() for name in head.headers), head.headers
                assert len(body) == head.length <= MAX_BODY
                found.append((head.method, head.target, head.path, head.query, head.version,
                              tuple(sorted(head.headers.items())), head.keep_alive, body))
        except WireError as error:
            assert 400 <= error.status < 600
            found.append(("error", error.status))
            return found
        assert parser.buffered <= MAX_HEAD + 4 + MAX_BODY + len(data), parser.buffered
    return found


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    cut_seed, stream = data[0], data[1:]
    whole = parse(stream, [])
    step = cut_seed % 17 + 1
    pieces = parse(stream, list(range(step, len(stream), step)))
    assert whole == pieces, (whole, pieces)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
