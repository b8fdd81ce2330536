"""scripts_vendor: run the vendor-data scripts of this instance, unless vendor data is switched off."""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.scripts import ScriptFailures, run_parts
from cloudseed.core.values import as_bool

MODULE = ModuleSpec(
    name="scripts_vendor", stage=STAGE_FINAL, title="Run vendor-data scripts",
    schema={"properties": {"vendor_data": {
        "type": "object",
        "properties": {
            "enabled": {"type": ["boolean", "string"]},
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
    try:
        run_parts(ctx.root, f"{ctx.instance_dir}/scripts/vendor", env={"INSTANCE_ID": ctx.instance_id})
    except ScriptFailures as e:
        raise ModuleError(str(e)) from None
