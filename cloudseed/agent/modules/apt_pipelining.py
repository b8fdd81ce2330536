"""apt_pipelining: how many HTTP requests apt keeps in flight on one connection.

``apt_pipelining: false`` writes ``Acquire::http::Pipeline-Depth "0";`` (no pipelining: some
servers and proxies, S3 among them, answer pipelined requests wrongly); a number 0..5 writes that
depth; ``none`` / ``unchanged`` / ``os`` (and ``true``) leave apt's own default, removing a
snippet an earlier instance wrote. The snippet is the file cloud-init uses,
``/etc/apt/apt.conf.d/90cloud-init-pipelining``, so an image switched from cloud-init keeps one.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec

SNIPPET = "/etc/apt/apt.conf.d/90cloud-init-pipelining"
KEEP_DEFAULT = ("none", "unchanged", "os", "true")

MODULE = ModuleSpec(
    name="apt_pipelining", stage=STAGE_CONFIG, activate_by=("apt_pipelining",), distros=("debian",),
    title="Configure apt HTTP pipelining",
    schema={"properties": {"apt_pipelining": {
        "oneOf": [{"type": "integer", "minimum": 0, "maximum": 5}, {"type": "boolean"},
                  {"type": "string", "enum": ["none", "unchanged", "os"]}],
        "description": "false: no pipelining (depth 0); 0..5: that pipeline depth; "
                       "none/unchanged/os: apt's default.",
    }}},
    examples=("apt_pipelining: false\n", "apt_pipelining: 3\n", "apt_pipelining: os\n"),
)


def depth_of(value: object) -> str | None:
    """The Pipeline-Depth to write for ``value``; None to keep apt's default; ValueError when invalid."""
    text = str(value).strip().lower()
    if text == "false":
        return "0"
    if text in KEEP_DEFAULT:
        return None
    if text in {str(n) for n in range(6)}:
        return text
    raise ValueError(text)


def handle(ctx: ModuleContext) -> None:
    value = ctx.cfg.get("apt_pipelining")
    try:
        depth = depth_of(value)
    except ValueError:
        raise ModuleError(f"apt_pipelining: {value!r} is not false, none, unchanged, os or a depth 0..5") from None
    if depth is None:
        if ctx.root.remove(SNIPPET):
            ctx.log.info("apt pipelining back to apt's default: removed %s", SNIPPET)
        return
    ctx.root.write(SNIPPET, "// Written by cloudseed per 'apt_pipelining'\n"
                            f'Acquire::http::Pipeline-Depth "{depth}";\n', mode=0o644)
    ctx.log.info("apt pipeline depth set to %s", depth)
