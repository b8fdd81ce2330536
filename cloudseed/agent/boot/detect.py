"""Which datasources can exist on this machine, decided from cheap local facts before any waiting.

Facts: DMI/SMBIOS strings (``/sys/class/dmi/id``), filesystem labels (``cidata``, ``config-2``),
seed directories, the kernel command line (``ds=nocloud;...``, ``ci.ds=NAME``), and the system
config (``datasource_list``, ``datasource: <Name>: ...``). Each datasource's own declared
``why`` decides (no datasource is named here); nothing here touches the network. The generator
uses this to switch the agent off on machines without any datasource, and the stages to skip
datasources that cannot exist.
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


def possible_datasources(root: TargetRoot, cfg: dict[str, Any], cmdline: str) -> list[tuple[str, str]]:
    """``[(name, reason)]`` for each listed datasource that may exist here, in list order.

    The fallback datasource (None) is not included (it always "exists"); a datasource cloudseed
    does not provide is skipped with a warning; a detector that crashes counts as "may exist"
    (never lose a boot).
    """
    from cloudseed.agent.datasources import DatasourceContext, datasource_class
    from cloudseed.agent.state import Paths

    names, _source = datasource_names(cfg, cmdline)
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name in names:
        try:
            cls = datasource_class(name)
        except (ImportError, AttributeError):
            LOG.warning("datasource_list names %r, which cloudseed does not provide; skipped", name)
            continue
        if cls.fallback or cls.name in seen:
            continue
        seen.add(cls.name)
        for stage in cls.stages:
            ctx = DatasourceContext(root=root, cfg=cfg, cmdline=cmdline, paths=Paths(root), stage=stage)
            try:
                reason = cls.why(ctx)
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
    the fallback datasource (None) is listed (it is what a cloud whose service failed falls back
    to, not a reason to run on a laptop), unless ``datasource_list`` names only the fallback or
    the config says ``datasource_detection: {notfound: enabled}``.
    """
    from cloudseed.agent.config import is_disabled
    from cloudseed.agent.datasources import datasource_class, is_fallback

    off = is_disabled(root, cmdline)
    if off:
        return {"enabled": False, "reason": off, "datasources": []}
    names, source = datasource_names(cfg, cmdline)
    possible = possible_datasources(root, cfg, cmdline)
    if possible:
        listed = ", ".join(f"{n} ({why})" for n, why in possible)
        return {"enabled": True, "reason": f"possible datasources: {listed}",
                "datasources": [list(p) for p in possible], "source": source}
    fallbacks = [n for n in names if is_fallback(n)]
    fallback = datasource_class(fallbacks[0]).name if fallbacks else ""
    policy = cfg.get("datasource_detection") if isinstance(cfg.get("datasource_detection"), dict) else {}
    if fallbacks and len(fallbacks) == len(names):
        return {"enabled": True, "reason": f"{source} names only {fallback}",
                "datasources": [[fallback, f"{source} names only {fallback}"]], "source": source}
    if fallbacks and str(policy.get("notfound", "disabled")).lower() == "enabled":
        return {"enabled": True, "reason": "no datasource found; datasource_detection.notfound is enabled",
                "datasources": [[fallback, "datasource_detection.notfound is enabled"]], "source": source}
    tried = ", ".join(n for n in names if n not in fallbacks) or "none"
    return {"enabled": False, "datasources": [], "source": source,
            "reason": f"no datasource can exist here (checked {tried} from {source})"}
