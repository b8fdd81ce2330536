"""The short fuzz run of the server's request parser, as a test: 20,000 atheris inputs, a few seconds.

The long run (``fuzz_wire.py -max_total_time=...``) and its figure are in docs/metadata-server.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_wire_parser_survives_20000_fuzzed_inputs(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(os.path.join(HERE, "seeds", "wire"), corpus)
    run = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_wire.py"), "-runs=20000", "-seed=1",
                          "-max_total_time=120", "-print_final_stats=1", f"-artifact_prefix={tmp_path}/",
                          str(corpus)],
                         capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    executed = re.search(r"stat::number_of_executed_units:\s+(\d+)", output)
    assert executed and int(executed.group(1)) >= 20000, output[-2000:]
