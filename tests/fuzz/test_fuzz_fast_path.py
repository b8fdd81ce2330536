"""The short differential fuzz run of the server's C fast path (fast_path_streams.py), as a test: ~25 s.

Two real servers on loopback (fast path on and off) get the same client streams, on new
connections and on connections C holds; the answers and how each connection ends must be the
same, and the fast server must still answer at the end. The long run
(``fast_path_streams.py --seconds ...``) is in docs/metadata-server.md; a stream it finds
differing is saved and goes into tests/fuzz/seeds/fast_path.
"""

from __future__ import annotations

import glob
import os
import random

import pytest

from cloudseed.provider.server.engine import fast_path
from tests.fuzz.fast_path_pair import ServerPair
from tests.fuzz.fast_path_streams import case, compare, every_offset_cases, load_seed

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = sorted(glob.glob(os.path.join(HERE, "seeds", "fast_path", "*.bin")))


@pytest.fixture(scope="module")
def pair():
    assert fast_path.available(), "the _fast_path extension is not built: run scripts/setup.sh"
    with ServerPair() as servers:
        yield servers
        assert servers.alive(), "the fast-path server no longer answers:\n" + servers.servers[True].log()[-3000:]


def _differing(pair, streams) -> list[str]:
    return [failure for sends in streams if (failure := compare(pair.ports, pair.source, sends))]


@pytest.mark.parametrize("seed", SEEDS, ids=os.path.basename)
def test_fixed_seed_streams_are_answered_alike(pair, seed):
    assert compare(pair.ports, pair.source, load_seed(seed)) is None


def test_a_head_split_anywhere_or_with_a_byte_removed_doubled_or_nul_is_answered_alike(pair):
    before = pair.answered_in_c()
    differing = _differing(pair, every_offset_cases())
    assert not differing, f"{len(differing)} streams differ; first:\n{differing[0][:3000]}"
    assert pair.answered_in_c() - before > 500  # C did take the valid heads and the held connections
    assert pair.alive()


def test_random_mutated_streams_with_a_fixed_seed_are_answered_alike(pair):
    rng = random.Random(1)
    before = pair.answered_in_c()
    differing = _differing(pair, [case(rng) for _ in range(400)])
    assert not differing, f"{len(differing)} streams differ; first:\n{differing[0][:3000]}"
    assert pair.answered_in_c() - before > 300
    assert pair.alive()
