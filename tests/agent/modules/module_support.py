"""Helpers the per-module tests import: a datasource stand-in and a runner through the real framework."""

from __future__ import annotations

import errno
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

RHEL_OS_RELEASE = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n'


@dataclass
class InputDatasource:
    """The datasource facts modules read (what a real datasource would have fetched)."""

    local_hostname: str | None = None
    public_keys: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    name: str = "Test"


def run(root, module: str, cfg: dict, datasource=None, instance_data: dict | None = None, stage: str = "config"):
    """Run one module through the real framework (forced past its semaphore); returns (result, context).

    On the host's own root (``TargetRoot("/")``: disks on loop devices, namespaces) the module acts
    on the machine, but its state (semaphores) goes to a scratch root, never to the host's
    ``/var/lib/cloudseed``.
    """
    from cloudseed.agent.modules import ModuleContext, run_module
    from cloudseed.agent.state import Paths
    from cloudseed.core.root import TargetRoot

    with tempfile.TemporaryDirectory(prefix="module-state-") as scratch:
        state_root = TargetRoot(scratch) if root.is_live else root
        ctx = ModuleContext(root=root, paths=Paths(state_root), cfg=cfg, instance_id="i-test", stage=stage,
                            datasource=datasource, instance_data=instance_data if instance_data is not None else {})
        result = run_module(ctx, module, force=True)
    return result, ctx


def disk_full_at(monkeypatch, inner: str, before=None) -> None:
    """Every ``TargetRoot.write`` of ``inner`` fails as on a full disk (ENOSPC naming it), ``before()``
    called first (what else the full disk does then); undone with ``monkeypatch``."""
    from cloudseed.core.root import TargetRoot

    real_write = TargetRoot.write

    def write(self, path, *args, **kwargs):
        if path == inner:
            if before is not None:
                before()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return real_write(self, path, *args, **kwargs)

    monkeypatch.setattr(TargetRoot, "write", write)


def examples(module: str) -> list[dict]:
    """The examples ``module`` declares (what docs/modules.md shows), parsed; the schema finds no error in any."""
    import yaml

    from cloudseed.agent.config.schema import build_module_schema
    from cloudseed.agent.config.validator import check
    from cloudseed.agent.modules import load_module

    spec, _ = load_module(module)
    parsed = []
    for index, text in enumerate(spec.examples):
        cfg = yaml.safe_load(text)
        errors = [str(p) for p in check(cfg, build_module_schema()) if p.level == "error"]
        assert not errors, f"{module} example {index}: {errors}"
        parsed.append(cfg)
    return parsed
