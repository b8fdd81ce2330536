"""apt_pipelining: the snippet cloud-init writes (same file, same setting), and apt really reads it."""

from __future__ import annotations

import pytest

from tests.agent.modules.module_support import examples, run

SNIPPET = "/etc/apt/apt.conf.d/90cloud-init-pipelining"


@pytest.mark.parametrize("value,depth", [(False, "0"), ("false", "0"), (0, "0"), (3, "3"), ("5", "5")])
def test_depth_written(target, value, depth):
    result, _ = run(target, "apt_pipelining", {"apt_pipelining": value})
    assert result.status == "ok", result.reason
    assert target.read_text(SNIPPET) == ("// Written by cloudseed per 'apt_pipelining'\n"
                                         f'Acquire::http::Pipeline-Depth "{depth}";\n')


@pytest.mark.parametrize("value", ["os", "none", "unchanged", True])
def test_default_kept_and_old_snippet_removed(target, value):
    target.write(SNIPPET, 'Acquire::http::Pipeline-Depth "0";\n')
    result, _ = run(target, "apt_pipelining", {"apt_pipelining": value})
    assert result.status == "ok", result.reason
    assert not target.exists(SNIPPET)


@pytest.mark.parametrize("value", [6, "fast", -1])
def test_invalid_value_is_named(target, value):
    result, _ = run(target, "apt_pipelining", {"apt_pipelining": value})
    assert result.status == "failed" and "apt_pipelining" in result.reason
    assert not target.exists(SNIPPET)


def test_not_on_rhel(rhel_target):
    result, _ = run(rhel_target, "apt_pipelining", {"apt_pipelining": False})
    assert result.status == "skipped" and "rhel" in result.reason


def test_real_apt_reads_the_depth(debian_root):
    result, _ = run(debian_root, "apt_pipelining", {"apt_pipelining": False})
    assert result.status == "ok", result.reason
    dump = debian_root.run(["apt-config", "dump"]).stdout
    assert 'Acquire::http::Pipeline-Depth "0";' in dump


# what each declared example leaves: the depth written, or None (apt's own default: no snippet)
EXAMPLE_DEPTHS = ["0", "3", None]


def test_each_example_writes_what_it_shows(target):
    cfgs = examples("apt_pipelining")
    assert len(cfgs) == len(EXAMPLE_DEPTHS), "a new example needs its expected depth here"
    for index, (cfg, depth) in enumerate(zip(cfgs, EXAMPLE_DEPTHS)):
        result, _ = run(target, "apt_pipelining", cfg)
        assert result.status == "ok", f"example {index}: {result.reason}"
        if depth is None:  # the snippet the example before wrote is taken away
            assert not target.exists(SNIPPET), f"example {index}"
        else:
            assert f'Acquire::http::Pipeline-Depth "{depth}";' in target.read_text(SNIPPET), f"example {index}"
