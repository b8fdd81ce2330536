"""Whether vendor-data may be used, read from the (user and system) configuration.

The ``vendor_data`` key: ``enabled`` (default true; false, "false", "no", ... turn vendor-data
off) and ``disabled_handlers`` (content types whose vendor-data parts are ignored, e.g.
``text/x-shellscript``). A ``vendor_data`` that is not a mapping disables vendor-data, as in
cloud-init.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_TRUE = ("true", "1", "on", "yes")


@dataclass
class VendorDataPolicy:
    enabled: bool = True
    disabled_handlers: list[str] = field(default_factory=list)
    problem: str | None = None


def vendor_data_policy(config: dict | None, key: str = "vendor_data") -> VendorDataPolicy:
    """Read ``config[key]`` (``vendor_data`` or ``vendor_data2``)."""
    settings = (config or {}).get(key, {"enabled": True})
    if not isinstance(settings, dict):
        return VendorDataPolicy(False, [], f"{key} must be a mapping, not {type(settings).__name__}; "
                                            "vendor-data disabled")
    enabled = settings.get("enabled", True)
    if not isinstance(enabled, bool):
        enabled = str(enabled).lower().strip() in _TRUE
    disabled = settings.get("disabled_handlers") or []
    if isinstance(disabled, str):
        disabled = [disabled]
    return VendorDataPolicy(enabled, [str(d) for d in disabled])
