"""Schema verdicts on a corpus of cloud-configs, ours against Debian's cloud-init 22.4.

``schema_corpus/*.yaml``: documents written from the documented examples of the modules cloudseed
implements, and variations with one thing wrong. The file name says cloudseed's verdict (``ok-``
valid, ``bad-`` invalid); the differential test compares every verdict with the reference's
(``cloud-init schema -c FILE``: one reference process validates the whole corpus with the
function that command calls) and allows only the disagreements named in ``DELIBERATE``.
"""

from __future__ import annotations

import glob
import json
import os

import pytest
from reference import reference_cli, reference_python

CORPUS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "schema_corpus", "*.yaml")))

# file -> why cloudseed's verdict differs from cloud-init 22.4's
DELIBERATE = {
    # stricter: cloudseed rejects what 22.4 only calls deprecated
    "bad-sudo-true.yaml": "stricter: `sudo: true` grants nothing sensible; 22.4 accepts it with a deprecation",
    "bad-uid-word.yaml": "stricter: a uid must be a number (22.4 accepts any string, deprecated)",
    # accepted by cloudseed, rejected by 22.4's schema
    "ok-sudo-list.yaml": "a list of sudo rules: cloud-init's own code and Debian's cloud.cfg (default_user) "
                         "use it, only 22.4's schema forgot it",
    "ok-doas.yaml": "`doas` rules for a user: documented by cloud-init after 22.4 (23.2)",
    "ok-locale-false.yaml": "`locale: false` leaves the locale alone: documented by newer cloud-init",
    "bad-wireguard-no-name.yaml": "stricter: a WireGuard interface needs its name (cloud-init 22.4 fails later)",
    "ok-ntp-peers-allow.yaml": "ntp `peers` and `allow`: documented by cloud-init after 22.4",
    "ok-packages-ok.yaml": "`- apt: [...]` / `- snap: [...]` package entries: documented by cloud-init after 22.4",
    "ok-rsyslog-list-legacy.yaml": "`rsyslog` as a list of config lines: the old form cloud-init's code still reads",
    "ok-yum-value-list.yaml": "a list as a repository option value: cloud-init's code writes it as lines",
}

_REFERENCE_VERDICTS = r"""
import contextlib, io, json, sys
from cloudinit.config.schema import SchemaValidationError, get_schema, validate_cloudconfig_file
schema = get_schema()
verdicts = {}
for path in sys.argv[1:]:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            validate_cloudconfig_file(path, schema)
        verdicts[path] = [True, ""]
    except (SchemaValidationError, RuntimeError) as e:
        verdicts[path] = [False, str(e)]
print(json.dumps(verdicts))
"""


def ours(path: str) -> tuple[bool, list[str]]:
    from cloudseed.commands.schema import check_text

    with open(path) as f:
        problems, errors = check_text(f.read(), path)
    return errors == 0, [str(p) for p in problems if p.level == "error"]


def test_corpus_is_large_and_mixed():
    names = [os.path.basename(p) for p in CORPUS]
    assert len(names) >= 60
    assert sum(n.startswith("ok-") for n in names) >= 30 and sum(n.startswith("bad-") for n in names) >= 30
    assert all(n.startswith(("ok-", "bad-")) for n in names)


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_our_verdict_is_the_one_the_file_name_says(path):
    valid, errors = ours(path)
    assert valid == os.path.basename(path).startswith("ok-"), errors


@pytest.mark.reference
def test_verdicts_agree_with_the_reference():
    proc = reference_python(_REFERENCE_VERDICTS, *CORPUS)
    theirs = json.loads(proc.stdout)
    disagree = {}
    for path in CORPUS:
        valid, errors = ours(path)
        if valid != theirs[path][0]:
            disagree[os.path.basename(path)] = (valid, errors, theirs[path][1])
    assert set(disagree) == set(DELIBERATE), json.dumps(
        {k: v for k, v in disagree.items() if k not in DELIBERATE}, indent=1)
    agreement = 1 - len(disagree) / len(CORPUS)
    print(f"schema verdicts: {len(CORPUS) - len(disagree)}/{len(CORPUS)} agree ({agreement:.1%})")
    assert agreement >= 0.95


@pytest.mark.reference
def test_the_batch_gives_the_verdicts_of_the_reference_command():
    """The batch above calls what ``cloud-init schema -c`` calls: check that on one valid and one invalid file."""
    for name, valid in (("ok-users-default-and-full.yaml", True), ("bad-users-entry-without-name.yaml", False)):
        path = next(p for p in CORPUS if p.endswith(name))
        proc = reference_cli("schema", "-c", path, check=False)
        assert (proc.returncode == 0) == valid, proc.stdout + proc.stderr
        assert ours(path)[0] == valid


_REFERENCE_EXAMPLES = r"""
import importlib, json, pkgutil
import cloudinit.config as config
examples = {}
for info in pkgutil.iter_modules(config.__path__):
    if info.name.startswith("cc_"):
        module = importlib.import_module("cloudinit.config." + info.name)
        examples[info.name[3:]] = list(getattr(module, "meta", {}).get("examples", []))
print(json.dumps(examples))
"""


@pytest.mark.reference
def test_no_false_error_on_any_example_cloud_init_documents():
    """Every example in cloud-init 22.4's module documentation is free of schema errors here."""
    import yaml

    from cloudseed.agent.schema import validate_config

    examples = json.loads(reference_python(_REFERENCE_EXAMPLES).stdout)
    assert len(examples) >= 55 and sum(len(v) for v in examples.values()) >= 100
    false_errors = {}
    for module, texts in examples.items():
        for index, text in enumerate(texts):
            cfg = yaml.safe_load(text)
            problems = [str(p) for p in validate_config(cfg, text) if p.level == "error"]
            if problems:
                false_errors[f"{module}[{index}]"] = problems
    assert false_errors == {}
