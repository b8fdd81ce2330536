"""Helpers the per-module tests import: a datasource stand-in and a runner through the real framework."""

from __future__ import annotations

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
    """Run one module through the real framework (forced past its semaphore); returns (result, context)."""
    from cloudseed.agent.modules import ModuleContext, run_module
    from cloudseed.agent.state import Paths

    ctx = ModuleContext(root=root, paths=Paths(root), cfg=cfg, instance_id="i-test", stage=stage,
                        datasource=datasource, instance_data=instance_data if instance_data is not None else {})
    result = run_module(ctx, module, force=True)
    return result, ctx
