"""The provider side installs with ``pipx install .``: ``cloudseed`` is the package's one console script,
and cloud-init's commands are not among them (a pip or pipx install must not shadow a system's cloud-init)."""

from __future__ import annotations

import os

import pytest

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_console_scripts_are_cloudseed_only():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(PROJECT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts.get("cloudseed") == "cloudseed.cli:main"
    assert not {"cloud-init", "cloud-id", "cloud-init-per"} & set(scripts)
    module, _, function = scripts["cloudseed"].partition(":")
    assert callable(getattr(__import__(module, fromlist=[function]), function))
