"""The skip budget (tests/skip_budget.py) really fails a run: pytest run on a small test file of its own.

The file has a test that skips with a listed reason, one that skips with another reason, one that
skips behind a switch, an expected failure and a passing test. Each run is a separate pytest
process with the budget installed from the tests package, as the suite's conftest does.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.skip_budget import EXPECTED, Expected

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TESTS = '''
import pytest

def test_listed():
    pytest.skip("a tool this machine may lack")

def test_not_listed():
    pytest.skip("xorriso is not installed")

@pytest.mark.skip(reason="slow; SLOW_SET=all runs it")
def test_behind_a_switch():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False

def test_passes():
    assert True
'''

CONFTEST = '''
from tests.skip_budget import Expected, SkipBudget

BUDGET = (
    Expected("test_sample.py::test_listed", r"a tool this machine may lack", "listed"),
    Expected("test_sample.py::test_behind_*", r"slow; SLOW_SET=all runs it", "a switch", switch=("SLOW_SET", "all")),
)


def pytest_configure(config):
    config.pluginmanager.register(SkipBudget(BUDGET), "budget")
'''


def run(tmp_path, tests: str = TESTS, **env) -> subprocess.CompletedProcess:
    (tmp_path / "test_sample.py").write_text(tests)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    environ = {k: v for k, v in os.environ.items() if k != "SLOW_SET"}
    environ.update(env, PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", str(tmp_path)],
                          cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120)


def test_a_skip_not_in_the_budget_fails_the_run_naming_it(tmp_path):
    proc = run(tmp_path)
    assert proc.returncode == 1, proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert "1 failed" in last and "2 skipped" in last and "1 passed" in last and "1 xfailed" in last, last
    assert "FAILED test_sample.py::test_not_listed" in proc.stdout
    assert "unexpected skip: xorriso is not installed" in proc.stdout
    assert "1 unexpected skip(s)" in proc.stdout


def test_a_switched_on_set_may_not_skip(tmp_path):
    proc = run(tmp_path, SLOW_SET="all")
    assert proc.returncode == 1, proc.stdout
    assert "ERROR test_sample.py::test_behind_a_switch" in proc.stdout  # a skip mark acts in setup: an error
    assert "FAILED test_sample.py::test_not_listed" in proc.stdout
    assert "2 unexpected skip(s)" in proc.stdout


def test_listed_skips_alone_pass(tmp_path):
    proc = run(tmp_path, TESTS.replace('pytest.skip("xorriso is not installed")', "pass"))
    assert proc.returncode == 0, proc.stdout
    assert "2 skipped" in proc.stdout.strip().splitlines()[-1]


def test_a_reason_matches_whole_and_the_test_id_by_glob():
    entry = Expected("tests/e2e/*", r"needs (qemu|kvm)", "example")
    assert entry.matches("tests/e2e/test_boots.py::test_x", "needs qemu", {})
    assert not entry.matches("tests/e2e/test_boots.py::test_x", "needs qemu-img", {})  # not a prefix match
    assert not entry.matches("tests/agent/test_x.py::test_y", "needs qemu", {})


def test_the_e2e_switch_is_part_of_the_rule():
    default_set = [e for e in EXPECTED if e.reason.startswith("not in the default e2e set")]
    assert default_set, "the budget lists the boots CLOUDSEED_E2E=all adds"
    nodeid, reason = "tests/e2e/test_cloud_boots.py::test_x", "not in the default e2e set; CLOUDSEED_E2E=all runs it"
    assert any(e.matches(nodeid, reason, {}) for e in EXPECTED)
    assert not any(e.matches(nodeid, reason, {"CLOUDSEED_E2E": "all"}) for e in EXPECTED)


def test_no_vm_boots_as_the_readme_says_is_an_expected_skip():
    # regression: the entry was switched off exactly when its skip happens (CLOUDSEED_E2E=0), so the
    # README's "CLOUDSEED_E2E=0 skips VM boots" failed every boot as an unexpected skip
    nodeid, reason = "tests/e2e/test_boots.py::test_x", "CLOUDSEED_E2E=0"
    assert any(e.matches(nodeid, reason, {"CLOUDSEED_E2E": "0"}) for e in EXPECTED)
