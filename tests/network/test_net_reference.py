"""Differential test: every corpus config through all five renderers, against Debian's cloud-init.

Both outputs are reduced to semantic facts (``net_semantic.py``); every fact only one side has must
be a documented deliberate difference (``net_differences.py``). The pass rate per renderer (exact vs
through documented differences) is printed at the end of the run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest
from net_corpus import RENDERERS, cases, distro_for, kind, load, macs_for, path_of
from net_differences import Ctx, explain
from net_semantic import FACTS, load_tree

from cloudseed.core.root import TargetRoot
from cloudseed.network import parse, render
from cloudseed.network.output import write_files

pytestmark = pytest.mark.reference

RESULTS: dict = {}      # (case, renderer) -> "exact" | "documented" | "fail" | "refused"
RULES_USED: dict = {}   # rule name -> number of (case, renderer) pairs it explained


@pytest.fixture(scope="session")
def reference_outputs():
    """(case, renderer) -> cloud-init's output tree (or an error string).

    Each ``cloud-init devel net-convert`` run takes about a second, so outputs are cached under
    the reference's cache directory, keyed by the reference package, the arguments and the input.
    """
    import reference

    tree = reference.reference_tree()
    if tree is None:
        pytest.skip("Debian's cloud-init is not available")
    version = _reference_version(tree)
    cache = os.path.join(reference.CACHE, "net-convert")

    def run(job):
        case, renderer = job
        args = ["devel", "net-convert", "--network-data", path_of(case), "--kind", kind(case),
                "--output-kind", renderer, "-D", distro_for(renderer)]
        for mac, name in macs_for(case).items():
            args += ["-m", f"{name},{mac}"]
        with open(path_of(case), "rb") as f:
            key = hashlib.sha256(repr((version, args[:2] + args[3:])).encode() + f.read()).hexdigest()
        out = os.path.join(cache, key)
        if not os.path.isdir(out):
            tmp = tempfile.mkdtemp(dir=os.path.dirname(out) if os.path.isdir(cache) else None)
            proc = reference.reference_cli(*args, "-d", tmp, check=False)
            if proc.returncode != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                return f"cloud-init failed: {proc.stderr.strip()[-400:]}"
            os.makedirs(cache, exist_ok=True)
            try:
                os.rename(tmp, out)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        return load_tree(out)

    os.makedirs(cache, exist_ok=True)
    jobs = [(c, r) for c in cases() for r in RENDERERS]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(jobs, pool.map(run, jobs)))


def _reference_version(tree: str) -> str:
    try:
        with open(os.path.join(tree, "usr", "lib", "python3", "dist-packages", "cloudinit", "version.py")) as f:
            return hashlib.sha256(f.read().encode()).hexdigest()
    except OSError:
        return "unknown"


def ours(case: str, renderer: str, tmp_path) -> dict:
    model = parse(load(case), macs=macs_for(case))
    root = TargetRoot(str(tmp_path))
    write_files(root, render(model, renderer, distro_for(renderer)))
    return load_tree(str(tmp_path)), model


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("case", cases())
def test_matches_reference(case, renderer, reference_outputs, tmp_path):
    ref_tree = reference_outputs[(case, renderer)]
    assert not isinstance(ref_tree, str), ref_tree
    tree, model = ours(case, renderer, tmp_path)
    our_facts, ref_facts = FACTS[renderer](tree), FACTS[renderer](ref_tree)
    ctx = Ctx(model=model, ours=our_facts, ref=ref_facts)
    unexplained, used = [], set()
    for side, facts in (("ours", our_facts - ref_facts), ("ref", ref_facts - our_facts)):
        for fact in sorted(facts, key=str):
            rule = explain(renderer, side, fact, ctx)
            if rule is None:
                unexplained.append(f"only in {'cloudseed' if side == 'ours' else 'cloud-init'}: {fact}")
            else:
                used.add(rule.name)
    for name in used:
        RULES_USED[name] = RULES_USED.get(name, 0) + 1
    RESULTS[(case, renderer)] = "fail" if unexplained else ("documented" if used else "exact")
    assert not unexplained, "\n".join(unexplained)


def summary_lines() -> list:
    if not RESULTS:
        return []
    lines = ["network renderers vs cloud-init 22.4 (semantic comparison of the corpus):"]
    lines.append(f"  {'renderer':16} {'cases':>5} {'exact':>6} {'documented':>11} {'fail':>5} {'pass rate':>10}")
    for r in RENDERERS:
        got = [v for (c, rr), v in RESULTS.items() if rr == r]
        if not got:
            continue
        n = len(got)
        exact, doc, fail = got.count("exact"), got.count("documented"), got.count("fail")
        lines.append(f"  {r:16} {n:5} {exact:6} {doc:11} {fail:5} {100.0 * (exact + doc) / n:9.1f}%")
    if RULES_USED:
        lines.append("  documented differences used (case x renderer pairs):")
        for name, n in sorted(RULES_USED.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {n:4}  {name}")
    return lines
