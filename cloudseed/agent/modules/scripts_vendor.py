"""scripts_vendor: run the vendor-data scripts of this instance, unless vendor data is switched off.

``vendor_data.prefix`` is put before each script's path (a string is one word, as cloud-init reads
it). Exit codes 1001-1003 are honoured as for every script module (``_script_exits.py``).
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._script_dirs import run_dirs
from cloudseed.core.values import as_bool

MODULE = ModuleSpec(
    name="scripts_vendor", stage=STAGE_FINAL, title="Run vendor-data scripts",
    schema={"properties": {"vendor_data": {
        "type": "object",
        "properties": {
            "enabled": {"oneOf": [{"type": "boolean"}, {"type": "string", "deprecated": True,
                                                        "deprecated_version": "22.3",
                                                        "deprecated_description": "Use a boolean."}]},
            "prefix": {"type": ["array", "string"], "items": {"type": ["string", "integer"]}},
        },
        "additionalProperties": False,
    }}},
    examples=(
        """\
#cloud-config
# Run the vendor's scripts through timeout(1): none may run longer than a minute.
vendor_data:
  enabled: true
  prefix: [timeout, 60]
""",
        """\
#cloud-config
# Ignore vendor data (its cloud-config and its scripts).
vendor_data:
  enabled: false
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    settings = ctx.cfg.get("vendor_data") or {}
    if not as_bool(settings.get("enabled"), True):
        ctx.log.info("vendor data is switched off")
        return
    prefix = settings.get("prefix") or []
    if isinstance(prefix, str):
        prefix = [prefix]
    if not isinstance(prefix, list) or not all(isinstance(p, (str, int)) and not isinstance(p, bool)
                                               for p in prefix):
        raise ModuleError(f"vendor_data.prefix: expected a command (a string or a list of words), got {prefix!r}")
    run_dirs(ctx, [f"{ctx.instance_dir}/scripts/vendor"], prefix=[str(p) for p in prefix])
