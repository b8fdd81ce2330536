"""How long rendering network config takes: cloudseed in-process, and the local stage's whole job.

    .venv/bin/python bench/network_render.py [--reference N]

Prints, per renderer, the median time to parse and render one corpus config, the time of
``apply_network`` (fallback, temporary root) and of importing ``cloudseed.network.apply`` in a
fresh interpreter; with ``--reference N``, also the median of N ``cloud-init devel net-convert``
runs (a process each: that is how cloud-init's local stage pays for it too, once per boot).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run as a script: the tests package (its corpus) of this checkout

from cloudseed.network import parse, render  # noqa: E402
from tests.network.net_corpus import RENDERERS, cases, distro_for, kind, load, macs_for, path_of  # noqa: E402


def ours() -> dict:
    out = {}
    for renderer in RENDERERS:
        times = []
        for case in cases():
            data = load(case)
            t0 = time.perf_counter()
            render(parse(data, macs=macs_for(case)), renderer, distro_for(renderer))
            times.append(time.perf_counter() - t0)
        out[renderer] = statistics.median(times)
    return out


def apply_once() -> float:
    from cloudseed.core.root import TargetRoot
    from cloudseed.network.apply import apply_network
    from tests.network.net_support import add_dev

    with tempfile.TemporaryDirectory() as d:
        from pathlib import Path

        add_dev(Path(d), "eth0", "52:54:00:12:34:56")
        os.makedirs(f"{d}/usr/sbin")
        with open(f"{d}/usr/sbin/netplan", "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(f"{d}/usr/sbin/netplan", 0o755)
        t0 = time.perf_counter()
        apply_network(TargetRoot(d), system_cfg={}, datasource_config=None, cmdline="", distro="debian",
                      new_instance=True, bring_up=False)
        return time.perf_counter() - t0


def import_cost() -> float:
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import cloudseed.network.apply"], check=True)
        runs.append(time.perf_counter() - t0)
    base = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        base.append(time.perf_counter() - t0)
    return statistics.median(runs) - statistics.median(base)


def reference(n: int) -> dict:
    from tests import reference as ref

    if ref.reference_tree() is None:
        return {}
    out = {}
    for renderer in RENDERERS:
        times = []
        for case in cases()[:n]:
            with tempfile.TemporaryDirectory() as d:
                args = ["devel", "net-convert", "--network-data", path_of(case), "--kind", kind(case),
                        "--output-kind", renderer, "-D", distro_for(renderer), "-d", d]
                for mac, name in macs_for(case).items():
                    args += ["-m", f"{name},{mac}"]
                t0 = time.perf_counter()
                ref.reference_cli(*args)
                times.append(time.perf_counter() - t0)
        out[renderer] = statistics.median(times)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--reference", type=int, default=0, metavar="N", help="also time N cloud-init runs per renderer")
    args = p.parse_args()
    mine = ours()
    theirs = reference(args.reference) if args.reference else {}
    print(f"{'renderer':16} {'cloudseed parse+render':>24} {'cloud-init net-convert':>24}")
    for r in RENDERERS:
        ref_s = f"{theirs[r] * 1000:.0f} ms" if r in theirs else "-"
        print(f"{r:16} {mine[r] * 1e6:>21.0f} us {ref_s:>24}")
    print(f"apply_network (fallback, netplan, temp root): {apply_once() * 1000:.1f} ms")
    print(f"import cloudseed.network.apply (over a bare interpreter): {import_cost() * 1000:.1f} ms")


if __name__ == "__main__":
    main()
