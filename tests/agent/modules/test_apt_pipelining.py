"""apt_pipelining: the snippet cloud-init writes (same file, same setting), and apt really reads it."""

from __future__ import annotations

import pytest
from module_support import run

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


def test_examples_validate_and_run(target):
    _examples_validate_and_run(target, "apt_pipelining")


def _examples_validate_and_run(root, name):
    import yaml

    from cloudseed.agent.config.schema import build_module_schema
    from cloudseed.agent.config.validator import check
    from cloudseed.agent.modules import load_module

    spec, _ = load_module(name)
    assert spec.examples
    for example in spec.examples:
        cfg = yaml.safe_load(example)
        assert not [p for p in check(cfg, build_module_schema()) if p.level == "error"], example
        result, _ = run(root, name, cfg)
        assert result.status in ("ok", "failed", "skipped")
        assert not result.reason.split(":")[0].endswith(("Error", "Exception")), result.reason
