"""Schema verdicts on a corpus of cloud-configs, ours against Debian's cloud-init 22.4 and 26.x.

``schema_corpus/*.yaml``: documents written from the documented examples of the modules cloudseed
implements, and variations with one thing wrong. The file name says cloudseed's verdict (``ok-``
valid, ``bad-`` invalid); the differential test compares every verdict with each oracle's
(``cloud-init schema -c FILE``: one reference process validates the whole corpus with the
function that command calls) and allows only the disagreements named in ``DELIBERATE`` (both
releases) and ``OLD_ONLY`` (where 22.4 and the newer release disagree, cloudseed follows the newer
one). Where both call a document invalid, the key paths of the errors must agree too.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re

import pytest

from tests.reference import NEW, OLD, reference_cli

CORPUS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "schema_corpus", "*.yaml")))

# file -> why cloudseed's verdict differs from both releases'
DELIBERATE = {
    "bad-sudo-true.yaml": "stricter: `sudo: true` grants nothing sensible (cloud-init writes 'user True' into "
                          "sudoers); both accept it with a deprecation",
    "bad-uid-word.yaml": "stricter: a uid must be a number (both accept any string, deprecated)",
    "bad-wireguard-no-name.yaml": "stricter: a WireGuard interface needs its name (cloud-init fails later)",
    "ok-rsyslog-list-legacy.yaml": "`rsyslog` as a list of config lines: the old form cloud-init's code still reads "
                                   "(deprecated since 22.2), only its schema rejects it",
    "ok-yum-value-list.yaml": "a list as a repository option value: cloud-init's code writes it as lines",
}
# file -> why cloudseed, following the newer release, differs from 22.4 there
OLD_ONLY = {
    "ok-sudo-list.yaml": "a list of sudo rules: cloud-init's own code and Debian's cloud.cfg (default_user) "
                         "use it, 22.4's schema forgot it (26.x accepts it)",
    "ok-doas.yaml": "`doas` rules for a user: added in cloud-init 23.2",
    "ok-locale-false.yaml": "`locale: false` leaves the locale alone: documented by newer cloud-init",
    "ok-ntp-peers-allow.yaml": "ntp `peers` and `allow`: added after 22.4",
    "ok-packages-ok.yaml": "`- apt: [...]` / `- snap: [...]` package entries: added after 22.4",
    "ok-users-empty.yaml": "`users: []` (nobody, not even the default user): valid since 23.x, 22.4's schema "
                           "wanted one entry",
    "bad-unknown-top-level-key.yaml": "an unknown top-level key is an error since 23.x; 22.4 let it pass",
    "bad-create-hostname-file-string.yaml": "`create_hostname_file` was added in 23.4; 22.4 let any value pass",
    "ok-write-files-source.yaml": "write_files `source` (uri, headers): added in cloud-init 24.3",
    "ok-users-hyphenated-keys.yaml": "`no-create-home`, `primary-group`...: hyphenated user keys every release "
                                     "applies, deprecated in the schema since 24.2; 22.4's schema rejected them",
}
# file -> why cloudseed differs from the newer release only (22.4 agrees with cloudseed)
NEW_ONLY = {
    "ok-apt-legacy-sources.yaml": "top-level `apt_sources`: cloud-init 26.x still converts and applies it "
                                  "(deprecated), only its schema dropped the key; 22.4 and cloudseed call it "
                                  "deprecated",
}


def deliberate_for(oracle) -> dict[str, str]:
    return {**DELIBERATE, **(OLD_ONLY if oracle is OLD else NEW_ONLY)}


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
@pytest.mark.parametrize("oracle", ["22.4", "new"], indirect=True)
def test_verdicts_agree_with_the_reference(oracle):
    proc = oracle.python(_REFERENCE_VERDICTS, *CORPUS)
    theirs = json.loads(proc.stdout)
    disagree = {}
    for path in CORPUS:
        valid, errors = ours(path)
        if valid != theirs[path][0]:
            disagree[os.path.basename(path)] = (valid, errors, theirs[path][1])
    deliberate = deliberate_for(oracle)
    assert set(disagree) == set(deliberate), json.dumps(
        {k: v for k, v in disagree.items() if k not in deliberate} or sorted(set(deliberate) - set(disagree)),
        indent=1)
    agreement = 1 - len(disagree) / len(CORPUS)
    print(f"schema verdicts vs {oracle.version()}: {len(CORPUS) - len(disagree)}/{len(CORPUS)} agree "
          f"({agreement:.1%})")
    assert agreement >= (0.98 if oracle is NEW else 0.95)


_REFERENCE_PROBLEMS = r"""
import json, sys, yaml
from cloudinit.config.schema import SchemaValidationError, get_schema, validate_cloudconfig_schema
schema = get_schema()
out = {}
for path in sys.argv[1:]:
    with open(path) as f:
        cfg = yaml.safe_load(f)
    try:
        validate_cloudconfig_schema(cfg, schema, strict=True)
        out[path] = [[], []]
    except SchemaValidationError as e:
        out[path] = [[list(p) for p in e.schema_errors], [list(p) for p in e.schema_deprecations]]
print(json.dumps(out))
"""
@functools.cache
def _their_problems() -> dict:
    """cloud-init 26.x's errors and deprecations for every corpus document (one reference process)."""
    return json.loads(NEW.python(_REFERENCE_PROBLEMS, *CORPUS).stdout)


_UNEXPECTED = re.compile(r"Additional properties are not allowed \((.*) (?:was|were) unexpected\)")


def _their_paths(problems: list) -> list[set[str]]:
    """Each of cloud-init's problems as the key paths it may mean: its own path and, for "additional
    properties" named at the parent, the unexpected keys' paths."""
    meant = []
    for path, message in problems:
        found = _UNEXPECTED.search(message)
        keys = re.findall(r"'([^']*)'", found.group(1)) if found else []
        meant.append({path} | {f"{path}.{k}" if path else k for k in keys})
    return meant


def _our_paths(path: str, level: str) -> set[str]:
    import yaml

    from cloudseed.agent.config.schema import validate_config

    with open(path) as f:
        cfg = yaml.safe_load(f)
    return {re.sub(r"\[(\d+)\]", r".\1", p.path) for p in validate_config(cfg) if p.level == level}


def _related(a: str, b: str) -> bool:
    """One path is the other, or inside it (cloud-init names a whole ``oneOf`` where we go deeper)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


@pytest.mark.reference
def test_error_paths_agree_with_the_newer_release():
    """Where cloudseed and cloud-init 26.x both call a document invalid, they name the same keys."""
    theirs = _their_problems()
    compared, differ = 0, {}
    for path in CORPUS:
        mine = _our_paths(path, "error")
        their = _their_paths(theirs[path][0])
        if not (mine and their):
            continue
        compared += 1
        if not (all(any(_related(a, b) for a in mine for b in meant) for meant in their)
                and all(any(_related(a, b) for meant in their for b in meant) for a in mine)):
            differ[os.path.basename(path)] = (sorted(mine), theirs[path][0])
    assert compared >= 100
    assert differ == {}, json.dumps(differ, indent=1)


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


# 22.4's examples whose keys the newer release's schema refuses (cloudseed follows the newer one):
# example -> (the key paths refused, why)
REFUSED_SINCE_22_4 = {
    "ssh[0]": (("ssh_keys.dsa_private", "ssh_keys.dsa_public", "ssh_keys.dsa_certificate", "ssh_genkeytypes[1]"),
               "DSA host keys (given, or a type to generate): dropped from cloud-init's schema in 24.1"),
}


@pytest.mark.reference
def test_no_false_error_on_any_example_cloud_init_documents():
    """Every example in cloud-init 22.4's module documentation is free of schema errors here, but for
    the keys the newer release refuses (``REFUSED_SINCE_22_4``)."""
    import yaml

    from cloudseed.agent.config.schema import validate_config

    examples = json.loads(OLD.python(_REFERENCE_EXAMPLES).stdout)
    assert len(examples) >= 55 and sum(len(v) for v in examples.values()) >= 100
    false_errors = {}
    for module, texts in examples.items():
        for index, text in enumerate(texts):
            cfg = yaml.safe_load(text)
            name = f"{module}[{index}]"
            refused = REFUSED_SINCE_22_4.get(name, ((), ""))[0]
            problems = [str(p) for p in validate_config(cfg, text) if p.level == "error" and p.path not in refused]
            if problems:
                false_errors[name] = problems
    assert false_errors == {}


# file -> why cloudseed's deprecation notes differ from what cloud-init 26.x reports at boot there
DEPRECATIONS_DIFFER: dict[str, str] = {}

# What cloud-init 26.x's boot logs as deprecated beyond its schema's deprecations (which its boot
# logs too): its code normalising users (``user`` as a string, ``users`` as a mapping or a string:
# every boot, for the default user and cc_users_groups) and converting the old apt keys, run on each
# document with the log captured (its deduplication reset per document). Each note -> the top-level
# key it names.
_REFERENCE_BOOT_DEPRECATIONS = r"""
import json, logging, re, sys, yaml
from cloudinit import helpers, lifecycle
from cloudinit.config import cc_apt_configure
from cloudinit.distros import fetch, ug_util
notes = []
class Keep(logging.Handler):
    def emit(self, record):
        notes.append(record.getMessage())
logging.getLogger("cloudinit").addHandler(Keep())
logging.getLogger("cloudinit").setLevel(logging.DEBUG)
distro = fetch("debian")("debian", {}, helpers.Paths({}))
out = {}
for path in sys.argv[1:]:
    with open(path) as f:
        cfg = yaml.safe_load(f)
    notes.clear()
    lifecycle.deprecate.log = set()
    for step in (lambda: ug_util.normalize_users_groups(dict(cfg), distro),
                 lambda: cc_apt_configure.convert_to_v3_apt_format(dict(cfg))):
        try:
            step()
        except Exception:
            pass   # the schema comparison covers documents these steps refuse
    keys = [next((k for k in re.findall(r"'([^']+)'", m) if k in cfg), None) for m in notes if "deprecated in" in m]
    out[path] = sorted({k for k in keys if k})
print(json.dumps(out))
"""


@functools.cache
def _their_boot_deprecations() -> dict:
    return json.loads(NEW.python(_REFERENCE_BOOT_DEPRECATIONS, *CORPUS).stdout)


@pytest.mark.reference
def test_deprecations_are_reported_where_cloud_init_26_reports_them():
    """Our schema's deprecation notes name the keys cloud-init 26.x's boot logs as deprecated: its
    schema's deprecations and those its code logs (``user`` as a string, ``users`` as a mapping...)."""
    theirs, at_boot = _their_problems(), _their_boot_deprecations()
    differ, noted, compared = {}, 0, 0
    for path in CORPUS:
        if theirs[path][0] or _our_paths(path, "error"):
            continue    # deprecations are compared where both call the document valid
        compared += 1
        mine = _our_paths(path, "deprecated")
        their = {p for p, _ in theirs[path][1]} | set(at_boot[path])
        noted += bool(mine or their)
        if not (all(any(_related(a, b) for b in their) for a in mine)
                and all(any(_related(a, b) for a in mine) for b in their)):
            differ[os.path.basename(path)] = (sorted(mine), sorted(their))
    assert set(differ) == set(DEPRECATIONS_DIFFER), json.dumps(
        {k: v for k, v in differ.items() if k not in DEPRECATIONS_DIFFER}
        or sorted(set(DEPRECATIONS_DIFFER) - set(differ)), indent=1)
    assert noted >= 15
    assert {os.path.basename(p) for p in CORPUS if at_boot[p]} >= {
        "ok-user-string.yaml", "ok-users-dict.yaml", "ok-users-string.yaml"}  # the notes only its code logs
    print(f"deprecation notes vs cloud-init {NEW.version()} at boot: {compared - len(differ)}/{compared} "
          f"documents agree ({noted} with notes)")


def test_a_deprecation_names_the_release_that_deprecated_it():
    from cloudseed.agent.config.schema import validate_config

    notes = {p.path: p.message for p in validate_config({
        "growpart": {"mode": False}, "manage_etc_hosts": "template", "vendor_data": {"enabled": "yes"},
        "power_state": {"mode": "reboot", "delay": "+5"}}) if p.level == "deprecated"}
    assert notes == {"growpart.mode": "deprecated since cloud-init 22.3: Use 'off'.",
                     "manage_etc_hosts": "deprecated since cloud-init 22.3: Use true.",
                     "vendor_data.enabled": "deprecated since cloud-init 22.3: Use a boolean.",
                     "power_state.delay": "deprecated since cloud-init 22.3: Use now or an integer."}
    # the old spellings real-world user-data still uses (chpasswd's list, apt_update...): 22.2
    notes = {p.path: p.message for p in validate_config({
        "chpasswd": {"list": "a:b", "expire": False}, "apt_update": True, "apt_upgrade": True,
        "apt_reboot_if_required": True}) if p.level == "deprecated"}
    assert notes == {"chpasswd.list": "deprecated since cloud-init 22.2: Use chpasswd.users.",
                     "apt_update": "deprecated since cloud-init 22.2: Use package_update.",
                     "apt_upgrade": "deprecated since cloud-init 22.2: Use package_upgrade.",
                     "apt_reboot_if_required": "deprecated since cloud-init 22.2: Use package_reboot_if_required."}
