"""cloudbase-init's exit codes for user scripts, for every script module (the one place they are read).

A script run by ``scripts_user`` (user-data ``#!`` scripts and the ``runcmd`` script),
``scripts_vendor`` or ``scripts_per_boot/per_instance/per_once`` may exit with:

- **1001**: reboot now; the script is done (not run again);
- **1002**: do not reboot; run the script again at the next boot;
- **1003**: reboot now and run the script again after it.

An exit status on Linux has 8 bits, so ``exit 1001`` is seen as 233 (1001 mod 256): 233, 234
and 235 mean 1001, 1002 and 1003 (``script_exit_codes: {enabled: false}`` makes them plain
failures again). A reboot stops the script module and the stage after it: the module's
semaphore is not marked, the stage's status is saved, and the machine reboots through
``power_state_change``'s machinery once the agent has exited (offline: logged, and recorded in
the status). The next boot resumes: the scripts that finished before the reboot are not run
again, the ones that asked are, and the ones not reached yet run. A script that asks to run
again more than ``script_exit_codes.max_reruns`` times in a row is stopped with an error.

What finished and how often a script asked again are kept in
``/var/lib/cloudseed/data/script-exit-codes.json`` (per module, for one instance).
"""

from __future__ import annotations

import logging

from cloudseed.agent.scripts import executables, run_script
from cloudseed.agent.state import PER_BOOT, PER_ONCE, write_json
from cloudseed.agent.state.files import load_json, object_problem
from cloudseed.core.root import CommandError

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Sequence

    from cloudseed.agent.modules import ModuleContext

LOG = logging.getLogger("cloudseed.scripts")

REBOOT = 1001          # reboot now, done
AGAIN = 1002           # no reboot, run again at the next boot
REBOOT_AGAIN = 1003    # reboot now, run again
MEANINGS = {REBOOT: "reboot now, done", AGAIN: "run again at the next boot", REBOOT_AGAIN: "reboot now, run again"}
DEFAULT_MAX_RERUNS = 5
REBOOT_COMMAND = ["shutdown", "-r", "now"]
REBOOT_WAIT = 60  # seconds the reboot waits at most for the agent to exit

SCHEMA = {
    "type": "object",
    "description": "cloudbase-init's exit codes of user scripts (runcmd, user-data scripts, scripts_*): "
                   "1001 reboot now (done), 1002 run again at the next boot, 1003 reboot now and run again. "
                   "On Linux they arrive as 233, 234, 235 (the low 8 bits).",
    "properties": {
        "enabled": {"type": "boolean", "default": True,
                    "description": "Read exit codes 1001-1003 (233-235) as requests; false: plain failures."},
        "max_reruns": {"type": "integer", "minimum": 0, "default": DEFAULT_MAX_RERUNS,
                       "description": "How many times in a row a script may ask to run again (1002/1003) "
                                      "before it is stopped with an error."},
    },
    "additionalProperties": False,
}


def meaning(returncode: int) -> int | None:
    """1001, 1002 or 1003 for a script's exit status (233-235 on Linux), else None."""
    code = returncode if returncode in MEANINGS else returncode + 768 if 233 <= returncode <= 235 else None
    return code if code in MEANINGS else None


def settings(cfg: dict) -> tuple[bool, int]:
    """(enabled, max_reruns) from ``script_exit_codes``; ValueError names a bad value."""
    section = cfg.get("script_exit_codes")
    if section is None:
        return True, DEFAULT_MAX_RERUNS
    if not isinstance(section, dict):
        raise ValueError("script_exit_codes: expected a mapping (enabled, max_reruns)")
    enabled = section.get("enabled", True)
    limit = section.get("max_reruns", DEFAULT_MAX_RERUNS)
    if not isinstance(enabled, bool):
        raise ValueError(f"script_exit_codes.enabled: expected true or false, got {enabled!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"script_exit_codes.max_reruns: expected a whole number >= 0, got {limit!r}")
    return enabled, limit



class Progress:
    """One script module's record across boots: the scripts done this round, the re-runs in a row."""

    def __init__(self, ctx: ModuleContext, frequency: str):
        self.root = ctx.root
        self.file = f"{ctx.paths.data_dir}/data/script-exit-codes.json"
        self.module = ctx.module_name or "scripts"
        self.instance = "" if frequency == PER_ONCE else ctx.instance_id
        loaded = load_json(self.root, self.file, object_problem)  # damaged: set aside, named in the status
        self.all: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        mine = self.all.get(self.module)
        if not isinstance(mine, dict) or mine.get("instance") != self.instance:
            mine = {}
        self.done: list[str] = [p for p in mine.get("done", []) if isinstance(p, str)]
        self.reruns: dict[str, int] = {p: n for p, n in (mine.get("reruns") or {}).items() if isinstance(n, int)}
        self.before = (list(self.done), dict(self.reruns))

    def save(self, round_over: bool) -> None:
        """Write the record (only when it changed); ``round_over``: every script had its turn."""
        if round_over:
            self.done = []
        if (self.done, self.reruns) == self.before:
            return
        if self.done or self.reruns:
            self.all[self.module] = {"instance": self.instance, "done": self.done, "reruns": self.reruns}
        else:
            self.all.pop(self.module, None)
        write_json(self.root, self.file, self.all, mode=0o600)


def run_script_dirs(ctx: ModuleContext, directories: Sequence[str], frequency: str,
                    prefix: Sequence[str] = ()) -> list[tuple[int, list[str]]]:
    """Run the scripts of ``directories`` honouring exit codes 1001-1003: for each directory, how many
    ran and the failures as ``"PATH (exit N)"``. Sets ``ctx.reboot`` / ``ctx.again`` when a script asks."""
    try:
        enabled, limit = settings(ctx.cfg)
    except ValueError as e:
        LOG.warning("%s; exit codes 1001-1003 read with the defaults", e)
        ctx.warn(str(e))
        enabled, limit = True, DEFAULT_MAX_RERUNS
    progress = Progress(ctx, frequency)
    counts: list[tuple[int, list[str]]] = []
    again: list[str] = []
    reboot = ""
    for directory in directories:
        if reboot:
            break
        ran, failures = 0, []  # type: int, list[str]
        for inner in executables(ctx.root, directory):
            if inner in progress.done:
                LOG.info("%s finished before the reboot; not run again", inner)
                continue
            if ctx.done_before(f"script {inner}"):
                LOG.info("%s succeeded in an earlier run of %s that failed on another script; not run again",
                         inner, ctx.module_name)
                continue
            asked = progress.reruns.get(inner, 0)
            if enabled and asked > limit:
                failures.append(f"{inner} (not run: it asked to run again {asked} times in a row, "
                                f"more than script_exit_codes.max_reruns = {limit})")
                continue
            ran += 1
            reboot = _run_one(ctx, inner, prefix, frequency, enabled, limit, progress, failures, again)
            if reboot:
                break
        counts.append((ran, failures))
    progress.save(round_over=not reboot and not again)
    if again:
        ctx.again = "runs again at the next boot: " + ", ".join(again)
    if reboot:
        _reboot(ctx, reboot)
    return counts


def _run_one(ctx: ModuleContext, inner: str, prefix: Sequence[str], frequency: str, enabled: bool, limit: int,
             progress: Progress, failures: list[str], again: list[str]) -> str:
    """Run one script and record what its exit status asks; why a reboot is needed now, or ""."""
    try:
        # recorded done the moment it exits 0 (forgotten when the module succeeds; kept while another fails)
        run_script(ctx.root, inner, {"INSTANCE_ID": ctx.instance_id}, prefix,
                   succeeded=lambda: ctx.record_done(f"script {inner}"))
        code = 0
    except CommandError as e:
        code = e.returncode
    wish = meaning(code) if enabled else None
    if wish == AGAIN and frequency == PER_BOOT:
        wish, code = None, 0  # a per-boot script runs at the next boot anyway: 1002 just means "fine"
    asked = progress.reruns.pop(inner, 0)
    if wish in (AGAIN, REBOOT_AGAIN):
        progress.reruns[inner] = asked + 1
        if asked + 1 > limit:
            failures.append(f"{inner} (exit {code}: asked to run again {asked + 1} times in a row, more than "
                            f"script_exit_codes.max_reruns = {limit}; stopped, no reboot)")
            LOG.error("script %s asked to run again %d times in a row; stopped", inner, asked + 1)
            return ""
        again.append(f"{inner} (exit {code}: {MEANINGS[wish]})")
        LOG.info("script %s exited %s: %s", inner, code, MEANINGS[wish])
        return f"{inner} exited {code} ({wish}: {MEANINGS[wish]})" if wish == REBOOT_AGAIN else ""
    if wish == REBOOT:
        progress.done.append(inner)
        LOG.info("script %s exited %s: %s", inner, code, MEANINGS[REBOOT])
        return f"{inner} exited {code} ({REBOOT}: {MEANINGS[REBOOT]})"
    if code == 0:
        progress.done.append(inner)
    else:
        failures.append(f"{inner} (exit {code})")
        LOG.warning("script %s failed with exit %s", inner, code)
    return ""


def _reboot(ctx: ModuleContext, why: str) -> None:
    """Ask for the reboot: the stage stops after this module and the machine reboots once the agent
    has exited, as ``power_state_change`` does it (offline: only logged)."""
    from cloudseed.agent.modules._after_exit import schedule

    ctx.reboot = why
    ctx.log.info("reboot requested: %s", why)
    schedule(ctx, REBOOT_COMMAND, "true", REBOOT_WAIT)
