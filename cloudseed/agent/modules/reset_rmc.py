"""reset_rmc: give an IBM PowerVM instance a new RSCT node id (no configuration).

On a new instance of a captured PowerVM image the RSCT node id (``/etc/ct_node_id``) must be
new, or the hypervisor's RMC talks to two machines as one. Where RSCT is installed (``rmcctrl``
in ``/opt/rsct/install/bin`` or ``/opt/rsct/bin``) this stops the RMC subsystem (``rmcctrl -z``),
reconfigures RSCT (``recfgct``, which makes a new node id and starts RMC again) and checks the id
changed. Elsewhere (every non-PowerVM machine) it does nothing and the log says why; without a
datasource (the ``None`` fallback) it does nothing either, as cloud-init does.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

RSCT_DIRS = ("/opt/rsct/install/bin", "/opt/rsct/bin")
NODE_ID_FILE = "/etc/ct_node_id"

MODULE = ModuleSpec(
    name="reset_rmc", stage=STAGE_FINAL, title="Reset the RSCT node id on IBM PowerVM",
    schema={"properties": {}},
)


def rsct_dir(ctx: ModuleContext) -> str | None:
    """The directory holding ``rmcctrl`` and ``recfgct``, when RSCT is installed."""
    for directory in RSCT_DIRS:
        if ctx.root.isfile(f"{directory}/rmcctrl"):
            return directory
    return None


def node_id(ctx: ModuleContext) -> str:
    try:
        return ctx.root.read_text(NODE_ID_FILE).split("\n", 1)[0].strip()
    except OSError as e:
        raise ModuleError(f"reset_rmc: cannot read the RSCT node id {NODE_ID_FILE}: {e.strerror or e}") from None


def handle(ctx: ModuleContext) -> None:
    directory = rsct_dir(ctx)
    if directory is None:
        ctx.log.info("reset_rmc: nothing to do: RSCT is not installed (no rmcctrl in %s)", " or ".join(RSCT_DIRS))
        return
    ds = ctx.datasource
    if ds is None or str(getattr(ds, "name", "")).lower() == "none":
        ctx.log.info("reset_rmc: nothing to do: no datasource found, so this is not a new cloud instance")
        return
    before = node_id(ctx)
    env = {"PATH": f"{directory}:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
    for argv, what in (([f"{directory}/rmcctrl", "-z"], "stopping the RMC subsystem"),
                       ([f"{directory}/recfgct"], "reconfiguring RSCT")):
        try:
            ctx.root.run(argv, input=b"", env=env, timeout=300)
        except CommandError as e:
            raise ModuleError(f"reset_rmc: {what} ({' '.join(argv)}) failed: {e}") from None
    after = node_id(ctx)
    if after == before:
        raise ModuleError(f"reset_rmc: recfgct ran but the node id in {NODE_ID_FILE} did not change")
    ctx.log.info("reset_rmc: new RSCT node id %s", after)
