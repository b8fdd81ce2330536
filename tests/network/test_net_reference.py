"""Differential test: every corpus config through all five renderers, against cloud-init 22.4 and 26.x.

Both outputs are reduced to semantic facts (``net_semantic.py``); every fact only one side has must
be a documented deliberate difference (``net_differences.py``). The pass rate per renderer (exact vs
through documented differences) is printed at the end of the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

import pytest

from cloudseed.core.root import TargetRoot
from cloudseed.network import parse, render
from cloudseed.network.output import write_files
from tests.network.net_corpus import RENDERERS, cases, distro_for, kind, load, macs_for, path_of
from tests.network.net_differences import Ctx, explain
from tests.network.net_semantic import FACTS, load_tree

pytestmark = pytest.mark.reference

RESULTS: dict = {}      # (case, renderer) -> "exact" | "documented" | "fail" | "refused"
RULES_USED: dict = {}   # rule name -> number of (case, renderer) pairs it explained


_OUTPUTS: dict = {}      # oracle label -> {(case, renderer): tree or error}
with open(os.path.join(os.path.dirname(__file__), "reference_net_convert.py")) as _driver:
    DRIVER = _driver.read()


def reference_outputs(oracle) -> dict:
    """(case, renderer) -> that cloud-init's output tree (or an error string).

    Outputs are cached under the reference's cache directory, keyed by the release, the arguments
    and the input; what is missing is converted in one reference process
    (``reference_net_convert.py``: cloud-init imported once, each conversion in a forked child).
    """
    from tests import reference

    if oracle.label in _OUTPUTS:
        return _OUTPUTS[oracle.label]
    version = oracle.version()
    cache = os.path.join(reference.CACHE, "net-convert")
    os.makedirs(cache, exist_ok=True)
    jobs, keys, missing = [], {}, []
    for case in cases():
        for renderer in RENDERERS:
            args = ["--network-data", path_of(case), "--kind", kind(case),
                    "--output-kind", renderer, "-D", distro_for(renderer)]
            for mac, name in macs_for(case).items():
                args += ["-m", f"{name},{mac}"]
            with open(path_of(case), "rb") as f:
                keys[(case, renderer)] = hashlib.sha256(
                    repr((version, ["devel", "net-convert"] + args[1:])).encode() + f.read()).hexdigest()
            jobs.append((case, renderer))
            if not os.path.isdir(os.path.join(cache, keys[(case, renderer)])):
                missing.append(((case, renderer), args))
    errors = {}
    if missing:
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            batch = [[args, os.path.join(tmp, str(i))] for i, (_, args) in enumerate(missing)]
            results = json.loads(oracle.python(DRIVER, input=json.dumps(batch), timeout=1800).stdout)
            for (job, _), (_, out), error in zip(missing, batch, results):
                if error is not None:
                    errors[job] = f"cloud-init failed: {error.strip()[-400:]}"
                    continue
                try:
                    os.rename(out, os.path.join(cache, keys[job]))
                except OSError:
                    pass  # another run cached it first
    _OUTPUTS[oracle.label] = {
        job: errors.get(job) or load_tree(os.path.join(cache, keys[job])) for job in jobs}
    return _OUTPUTS[oracle.label]


def ours(case: str, renderer: str, tmp_path) -> dict:
    model = parse(load(case), macs=macs_for(case))
    root = TargetRoot(str(tmp_path))
    write_files(root, render(model, renderer, distro_for(renderer)))
    return load_tree(str(tmp_path)), model


@pytest.mark.parametrize("oracle", ["22.4", "new"], indirect=True)
@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("case", cases())
def test_matches_reference(case, renderer, oracle, tmp_path):
    ref_tree = reference_outputs(oracle)[(case, renderer)]
    assert not isinstance(ref_tree, str), ref_tree
    tree, model = ours(case, renderer, tmp_path)
    our_facts, ref_facts = FACTS[renderer](tree), FACTS[renderer](ref_tree)
    ctx = Ctx(model=model, ours=our_facts, ref=ref_facts)
    unexplained, used = [], set()
    for side, facts in (("ours", our_facts - ref_facts), ("ref", ref_facts - our_facts)):
        for fact in sorted(facts, key=str):
            rule = explain(renderer, side, fact, ctx, oracle.label)
            if rule is None:
                unexplained.append(f"only in {'cloudseed' if side == 'ours' else 'cloud-init'}: {fact}")
            else:
                used.add(rule.name)
    for name in used:
        RULES_USED[(oracle.label, name)] = RULES_USED.get((oracle.label, name), 0) + 1
    RESULTS[(oracle.label, case, renderer)] = "fail" if unexplained else ("documented" if used else "exact")
    assert not unexplained, "\n".join(unexplained)


def summary_lines() -> list:
    lines = []
    for label in sorted({k[0] for k in RESULTS}):
        lines.append(f"network renderers vs cloud-init {label} (semantic comparison of the corpus):")
        lines.append(f"  {'renderer':16} {'cases':>5} {'exact':>6} {'documented':>11} {'fail':>5} {'pass rate':>10}")
        for r in RENDERERS:
            got = [v for (lb, c, rr), v in RESULTS.items() if rr == r and lb == label]
            if not got:
                continue
            n = len(got)
            exact, doc, fail = got.count("exact"), got.count("documented"), got.count("fail")
            lines.append(f"  {r:16} {n:5} {exact:6} {doc:11} {fail:5} {100.0 * (exact + doc) / n:9.1f}%")
        used = {name: n for (lb, name), n in RULES_USED.items() if lb == label}
        if used:
            lines.append("  documented differences used (case x renderer pairs):")
            for name, n in sorted(used.items(), key=lambda kv: -kv[1]):
                lines.append(f"    {n:4}  {name}")
    return lines
