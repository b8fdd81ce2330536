"""Short fuzz runs of the server's identity checks (IMDSv2 tokens, proxy signatures), as tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("target", ["token", "signature"])
def test_identity_check_survives_fuzzed_inputs(target, tmp_path):
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "seed").write_bytes(b"\x01\x01i-1\x00" + b"A" * 64)
    run = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_identity.py"), target, "-runs=20000",
                          "-seed=1", "-max_total_time=120", "-print_final_stats=1", f"-artifact_prefix={tmp_path}/",
                          str(corpus)],
                         capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    executed = re.search(r"stat::number_of_executed_units:\s+(\d+)", output)
    assert executed and int(executed.group(1)) >= 20000, output[-2000:]
