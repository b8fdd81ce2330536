"""snap: import snap assertions and run snap commands, through the target's ``snap`` command.

``assertions`` (a list, or a mapping whose values are taken in order) are joined into
``<instance dir>/snapd.assertions`` and acknowledged with one ``snap ack``. ``commands`` (a list,
or a mapping run in the order of its sorted keys) run one by one: a list is an argv that gets
``snap`` put in front when it does not start with it (a leading ``null`` keeps it as given), a
string is a shell line. Every command is tried; the failures are then reported together, each
with its index and the tool's error line. Without a ``snap`` command on the target nothing runs
and the module fails saying so. Output goes to the output log.
"""

from __future__ import annotations

import shlex

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_COMMAND = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": ["string", "null"]}}]}

MODULE = ModuleSpec(
    name="snap", stage=STAGE_CONFIG, activate_by=("snap",),
    title="Import snap assertions and run snap commands",
    schema={"properties": {"snap": {
        "type": "object", "minProperties": 1, "additionalProperties": False,
        "properties": {
            "assertions": {"type": ["object", "array"], "items": {"type": "string"}, "minItems": 1,
                           "uniqueItems": True, "minProperties": 1, "additionalProperties": {"type": "string"}},
            "commands": {"type": ["object", "array"], "items": _COMMAND, "minItems": 1, "minProperties": 1,
                         "additionalProperties": _COMMAND},
        },
    }}},
    examples=(
        "snap:\n  commands:\n    00: [install, hello-world]\n    01: snap install --classic certbot\n",
        "snap:\n  assertions:\n    - |\n      type: system-user\n      authority-id: example\n"
        "  commands:\n    - [snap, install, core22]\n",
    ),
)


def _listed(value: Any, key: str, sort: bool) -> list:
    if value is None:
        return []
    if isinstance(value, dict):
        return [value[k] for k in sorted(value, key=str)] if sort else list(value.values())
    if isinstance(value, list):
        return value
    raise ModuleError(f"snap.{key}: expected a list or a mapping")


def command_argv(command: Any, where: str) -> list[str]:
    """The argv one ``commands`` item runs (``sh -c LINE`` for a string)."""
    if isinstance(command, str):
        return ["sh", "-c", command]
    if isinstance(command, list) and command:
        if command[0] is None:
            command = command[1:]
        elif command[0] != "snap":
            command = ["snap", *command]
        if command and all(isinstance(a, (str, int, float)) for a in command):
            return [str(a) for a in command]
    raise ModuleError(f"{where}: expected a shell line or a non-empty list of arguments")


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.package_managers.base import failure_reason, record_output
    from cloudseed.core.root import CommandError

    settings = ctx.cfg.get("snap")
    if not isinstance(settings, dict):
        raise ModuleError("snap: expected a mapping with assertions and/or commands")
    assertions = _listed(settings.get("assertions"), "assertions", sort=False)
    commands = _listed(settings.get("commands"), "commands", sort=isinstance(settings.get("commands"), dict))
    for index, text in enumerate(assertions):
        if not isinstance(text, str):
            raise ModuleError(f"snap.assertions[{index}]: expected the assertion text")
    argvs = [command_argv(c, f"snap.commands[{i}]") for i, c in enumerate(commands)]
    if not assertions and not argvs:
        return
    if ctx.root.which("snap") is None:
        raise ModuleError("snap: the snap command is not installed on the target (snapd); "
                          f"{len(assertions)} assertion(s) and {len(argvs)} command(s) not run")

    def run(argv: list[str]) -> str | None:
        try:
            proc = ctx.root.run(argv, check=False, timeout=1800)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except CommandError as e:
            code, out, err = e.returncode, e.stdout, e.stderr
        record_output(ctx.root, shlex.join(argv), out, err)
        return None if code == 0 else failure_reason(out, err, code)

    if assertions:
        path = f"{ctx.instance_dir}/snapd.assertions"
        ctx.root.write(path, "\n".join(assertions), mode=0o644)
        problem = run(["snap", "ack", path])
        if problem:
            raise ModuleError(f"snap.assertions: snap ack failed: {problem}")
        ctx.log.info("acknowledged %d snap assertion(s)", len(assertions))
    failures = []
    for index, argv in enumerate(argvs):
        if argv[0] == "sh" and not argv[2].startswith("snap "):
            ctx.log.warning("snap.commands[%d] does not start with 'snap': %s", index, argv[2])
        problem = run(argv)
        if problem:
            failures.append(f"snap.commands[{index}] ({shlex.join(argv) if argv[0] != 'sh' else argv[2]}): "
                            f"{problem}")
    if failures:
        raise ModuleError("; ".join(failures))
