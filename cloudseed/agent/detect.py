"""Which datasources can exist on this machine, decided from cheap local facts before any waiting.

Facts: DMI/SMBIOS strings (``/sys/class/dmi/id``), filesystem labels (``cidata``, ``config-2``),
seed directories, the kernel command line (``ds=nocloud;...``, ``ci.ds=NAME``), and the system
config (``datasource_list``, ``datasource: <Name>: ...``). Each datasource's own ``why`` (or
``detect``) decides; nothing here touches the network. The generator uses this to switch the agent
off on machines without any datasource, and the stages to skip datasources that cannot exist.
"""

from __future__ import annotations

import logging

from cloudseed.core.root import TargetRoot

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.detect")

CMDLINE_LIST_KEYS = ("ci.ds", "ci.datasource", "cloudseed.ds")


def datasource_names(cfg: dict[str, Any], cmdline: str) -> tuple[list[str], str]:
    """The datasource list to consider and where it came from (kernel command line or config)."""
    for token in cmdline.split():
        key, sep, value = token.partition("=")
        if sep and key in CMDLINE_LIST_KEYS and value:
            return [v for v in value.split(",") if v], f"kernel command line {key}"
    from cloudseed.core.values import get_list

    return [str(n) for n in get_list(cfg, "datasource_list")], "datasource_list"


def _reason(cls: type, ctx: Any) -> str | None:
    why = getattr(cls, "why", None)
    if callable(why):
        return why(ctx)
    if not cls.detect(ctx):
        return None
    if cls.name == "NoCloud":
        return _nocloud_reason(ctx)
    return f"{cls.name} detection found it"


def _nocloud_reason(ctx: Any) -> str:
    from cloudseed.agent.datasources.nocloud import SEED_DIRS, parse_ds_argument

    if parse_ds_argument(ctx.cmdline) is not None:
        return "kernel command line has ds=nocloud"
    if parse_ds_argument(ctx.dmi("product_serial")) is not None:
        return "DMI product_serial has ds=nocloud"
    for directory in SEED_DIRS:
        if ctx.root.isfile(f"{directory}/meta-data") or ctx.root.isfile(f"{directory}/user-data"):
            return f"seed directory {directory}"
    if ctx.ds_cfg("NoCloud"):
        return "datasource.NoCloud is configured"
    return "filesystem labelled cidata"


def possible_datasources(root: TargetRoot, cfg: dict[str, Any], cmdline: str) -> list[tuple[str, str]]:
    """``[(name, reason)]`` for each listed datasource that may exist here, in list order.

    ``None`` is not included (it always "exists"); a datasource cloudseed does not provide is
    skipped with a warning; a detector that crashes counts as "may exist" (never lose a boot).
    """
    from cloudseed.agent.datasources import DatasourceContext, datasource_class
    from cloudseed.agent.state import Paths

    names, _source = datasource_names(cfg, cmdline)
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name in names:
        if name.lower() == "none":
            continue
        try:
            cls = datasource_class(name)
        except (ImportError, AttributeError):
            LOG.warning("datasource_list names %r, which cloudseed does not provide; skipped", name)
            continue
        if cls.name in seen:
            continue
        seen.add(cls.name)
        for stage in cls.stages:
            ctx = DatasourceContext(root=root, cfg=cfg, cmdline=cmdline, paths=Paths(root), stage=stage)
            try:
                reason = _reason(cls, ctx)
            except Exception as e:
                LOG.warning("datasource %s: detection failed (%s); treating it as possible", cls.name, e)
                reason = f"detection failed ({e}); tried anyway"
            if reason:
                found.append((cls.name, reason))
                break
    return found


def decide(root: TargetRoot, cfg: dict[str, Any], cmdline: str) -> dict[str, Any]:
    """The generator's verdict: ``{"enabled": bool, "reason": str, "datasources": [[name, why]]}``.

    Like cloud-init's ds-identify, a machine where no datasource can exist is disabled even when
    ``None`` is listed (``None`` is the fallback of a cloud whose service failed, not a reason to
    run on a laptop), unless ``datasource_list`` is exactly ``[None]`` or the config says
    ``datasource_detection: {notfound: enabled}``.
    """
    from cloudseed.agent.config import is_disabled

    off = is_disabled(root, cmdline)
    if off:
        return {"enabled": False, "reason": off, "datasources": []}
    names, source = datasource_names(cfg, cmdline)
    possible = possible_datasources(root, cfg, cmdline)
    if possible:
        listed = ", ".join(f"{n} ({why})" for n, why in possible)
        return {"enabled": True, "reason": f"possible datasources: {listed}",
                "datasources": [list(p) for p in possible], "source": source}
    has_none = any(n.lower() == "none" for n in names)
    policy = cfg.get("datasource_detection") if isinstance(cfg.get("datasource_detection"), dict) else {}
    if has_none and all(n.lower() == "none" for n in names):
        return {"enabled": True, "reason": f"{source} names only None",
                "datasources": [["None", f"{source} names only None"]], "source": source}
    if has_none and str(policy.get("notfound", "disabled")).lower() == "enabled":
        return {"enabled": True, "reason": "no datasource found; datasource_detection.notfound is enabled",
                "datasources": [["None", "datasource_detection.notfound is enabled"]], "source": source}
    tried = ", ".join(n for n in names if n.lower() != "none") or "none"
    return {"enabled": False, "datasources": [], "source": source,
            "reason": f"no datasource can exist here (checked {tried} from {source})"}
