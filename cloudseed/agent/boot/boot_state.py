"""The small state one boot carries from stage to stage: root, paths, config, status, datasource.

Built once per process (``BootState.load``); the stage functions in ``stages.py`` and
``stage_local.py`` take it and pass it on, so ``cloudseed boot`` (all four stages in one process)
reads the configuration once and keeps the datasource it found in memory.
"""

from __future__ import annotations

import time

from cloudseed.agent.config import is_disabled, load_system_config, merge_config, read_cmdline
from cloudseed.agent.state import Paths
from cloudseed.agent.state.files import load_json, take_warnings
from cloudseed.agent.state.log import console
from cloudseed.agent.state.status import StatusRecorder
from cloudseed.core.root import TargetRoot

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Callable

    from cloudseed.agent.datasources import Datasource, DatasourceContext


def boot_record_problem(data: Any) -> str | None:
    """Why ``data`` is not a ``boot.json`` record (instance id, new instance, datasource), or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__} where an object belongs"
    if not isinstance(data.get("instance_id"), str) or not data["instance_id"]:
        return "it names no instance id"
    if not isinstance(data.get("new_instance", False), bool):
        return "new_instance is not true or false"
    if not isinstance(data.get("datasource", ""), str):
        return "datasource is not a name"
    return None


class BootState:
    """What the stages of one boot share (no behaviour beyond reading it)."""

    __slots__ = ("root", "paths", "cmdline", "system_cfg", "files_cfg", "plain_cfg", "config_errors", "status",
                 "_datasource", "record", "output", "reporter", "network_ctx", "stage", "background",
                 "joined_later", "prepared")

    def __init__(self, root: TargetRoot, paths: Paths, cmdline: str, system_cfg: dict,
                 config_errors: list[str], status: StatusRecorder, files_cfg: dict | None = None):
        self.root = root
        self.paths = paths
        self.cmdline = cmdline
        # the ``--file`` settings of this command (cloud-init's ``-f``): over every other source
        self.files_cfg: dict = files_cfg or {}
        self.plain_cfg = system_cfg  # as the files on disk give it: what later stages are handed on
        self.system_cfg = self.with_files(system_cfg)
        self.config_errors = config_errors
        self.status = status
        self.reporter: Any = None  # cloudseed.agent.reporting.Reporter once ``reporting`` was configured
        self.stage: str | None = None  # the stage running (``begin``)
        self._datasource: Datasource | None = None
        # /run/cloudseed/boot.json: instance id, whether it is new this boot, datasource name
        self.record: dict[str, Any] = load_json(root, paths.run("boot.json"), boot_record_problem) or {}
        self.output: Any = None  # cloudseed.agent.state.output.Redirection once ``output`` was configured
        # the network stage's module context (its merged config) once that stage ran its modules
        self.network_ctx: Any = None
        # commands modules left running beside later modules (``modules/_background.py``), and whether
        # a later stage of this process joins them (else the network stage does, at its end)
        self.background: list = []
        self.joined_later = False
        # the user-data parsed and checked before the network stage (``userdata_stage.prepare``)
        self.prepared: dict | None = None

    @classmethod
    def load(cls, root: TargetRoot, files_cfg: dict | None = None) -> BootState:
        paths = Paths(root)
        cmdline = read_cmdline(root)
        errors: list[str] = []
        system_cfg = load_system_config(root, cmdline, errors=errors)
        return cls(root, paths, cmdline, system_cfg, errors, StatusRecorder(paths), files_cfg)

    def with_files(self, cfg: dict) -> dict:
        """``cfg`` with this command's ``--file`` settings over it (they win over user-data too)."""
        return merge_config(cfg, self.files_cfg) if self.files_cfg else cfg

    @classmethod
    def load_for(cls, root: TargetRoot, stage: str, files_cfg: dict | None = None) -> BootState | None:
        """``load`` for a stage about to run; None when even that fails (then recorded as the stage's crash)."""
        try:
            return cls.load(root, files_cfg)
        except Exception as e:  # noqa: BLE001 - recorded: the wait for the boot must end
            from cloudseed.agent.state import Paths as _Paths

            message = f"{stage} stage: {type(e).__name__}: {e}"
            try:
                StatusRecorder(_Paths(root)).crash(stage, message)
            except Exception:  # noqa: BLE001 - the console and the exit code say it then
                console(f"cloudseed: {message} (and the status could not be recorded)")
            return None

    @property
    def datasource(self) -> Datasource | None:
        return self._datasource

    @datasource.setter
    def datasource(self, value: Datasource | None) -> None:
        self._datasource = value
        if self.reporter is not None:  # a handler may learn from it where to send (reporting/cloudseed.py)
            self.reporter.locate(value, self.stage)

    @property
    def instance_id(self) -> str | None:
        return self.datasource.instance_id if self.datasource else None

    def ds_context(self, stage: str) -> DatasourceContext:
        from cloudseed.agent.datasources import DatasourceContext

        return DatasourceContext(self.root, self.system_cfg, self.cmdline, self.paths, stage)

    def disabled_reason(self) -> str | None:
        reason = is_disabled(self.root, self.cmdline)
        if reason is None and self.root.exists(self.paths.run("disabled")):
            try:
                reason = self.root.read_text(self.paths.run("disabled")).strip() or "disabled by the generator"
            except OSError:  # not a file: the generator's marker all the same
                reason = "disabled by the generator"
        return reason

    def redirect_output(self, stage: str, cfg: dict, problems: list[str]) -> None:
        """Send this stage's stdout/stderr where ``output`` in ``cfg`` says (nothing to do: no import)."""
        if self.output is None:
            if "output" not in cfg:
                return
            from cloudseed.agent.state.output import Redirection

            self.output = Redirection(self.root)
        self.output.apply(cfg, stage, problems)

    def restore_output(self) -> None:
        if self.output is not None:
            self.output.restore()

    def strict_settings(self) -> dict | None:
        """Strict mode's settings (``strict.py``) when it is on (asked only of a stage with problems)."""
        from cloudseed.agent.boot import strict

        return strict.settings(self.system_cfg, self.cmdline, self.datasource)

    def strict_stopped(self, stage: str) -> int | None:
        """After a strict-mode failure in an earlier stage: this stage runs nothing (its exit code)."""
        if not self.root.exists(self.paths.run("strict-failed")):
            return None
        from cloudseed.agent.boot import strict

        return strict.skip_stage(self, stage, f"strict mode stopped the boot: {strict.failed(self)}")

    def module_failed(self, stage: str, module: str, reason: str) -> None:
        """A module of ``stage`` failed just now: under strict mode logins are refused at once."""
        from cloudseed.agent.boot import strict

        strict.module_failed(self, stage, module, reason or "failed")

    def update_reporting(self, cfg: dict, stage: str | None = None) -> None:
        """Start or change event reporting from ``cfg``'s ``reporting`` (nothing to do: no import).

        A reporter made in the middle of a boot first sends what this boot's status already
        records (earlier stages, the start of ``stage``), so the platform sees the whole boot."""
        settings = cfg.get("reporting")
        if not settings and self.reporter is None:
            return
        from cloudseed.agent.reporting import Reporter

        fresh = self.reporter is None
        if fresh:
            self.reporter = Reporter(self.root, sent_file=self.paths.run("reported-stages"))
        self.reporter.configure(settings, cfg)
        if fresh and stage is not None and self.reporter.handlers:
            self.reporter.replay(self.status.v1, stage)
        self.reporter.locate(self.datasource, self.stage)

    def guarded(self, stage: str, body: Callable[[], int]) -> int:
        """``body()`` (a whole stage); anything it lets out is the stage's crash, recorded, never raised."""
        try:
            return body()
        except Exception as e:  # noqa: BLE001 - a stage records its failure and the wait ends
            import logging

            logging.getLogger("cloudseed.stages").error("%s stage failed", stage, exc_info=not isinstance(e, OSError))
            self.restore_output()
            self.status.crash(stage, f"{stage} stage: {type(e).__name__}: {e}")
            return 1

    def recorded(self, errors: list[str], write: Callable[..., Any], *args: Any) -> bool:
        """``write(*args)``, a step that keeps state; on a full or read-only disk its error (naming the file)
        goes to ``errors`` and the stage goes on to what it can still do (users and keys live elsewhere)."""
        try:
            write(*args)
            return True
        except OSError as e:
            import logging

            logging.getLogger("cloudseed.stages").error("%s", e)
            errors.append(f"state not kept: {e}")
            return False

    def begin(self, stage: str) -> float:
        self.stage = stage
        console(f"cloudseed: stage {stage} start")
        self.status.start(stage)
        if self.reporter is not None:
            self.reporter.stage_start(stage)
        self.update_reporting(self.system_cfg, stage)  # the first time: this stage's start replayed
        return time.monotonic()

    def end(self, stage: str, started: float, errors: list[str], warnings: list[str], modules: list[dict]) -> int:
        elapsed = time.monotonic() - started
        warnings.extend(take_warnings())  # damaged state files this stage set aside
        reboot = next((m["reboot"] for m in modules if m.get("reboot")), "")
        if reboot:  # a user script asked for a reboot now: this boot goes on after it (no result yet)
            from cloudseed.agent.state.status import STAGE_KEYS

            self.status.v1[STAGE_KEYS[stage]].update(errors=errors, warnings=warnings, modules=modules)
            self.status.v1.update(stage=None, reboot=reboot)
            if not self.status.save():
                errors.append(self.status.unsaved)
            console(f"cloudseed: stage {stage} stopped for a reboot: {reboot}")
            return 1 if errors else 0
        if self.reporter is not None:
            warnings += self.reporter.take_problems()  # reporting settings it could not use
        self.status.finish(stage, errors, warnings, modules, self.datasource.name if self.datasource else None)
        if self.status.unsaved:  # a full or read-only disk: marked where it fits (status.py)
            errors = [*errors, self.status.unsaved]
        strict = self.strict_settings() if errors or warnings else None
        if strict is not None and (errors or (strict["warnings"] and warnings)):
            from cloudseed.agent.boot import strict as strict_mode

            if not strict_mode.failed(self):  # the first failure fails the boot; later stages ran nothing
                errors = [*errors, strict_mode.fail(self, stage, errors, warnings, strict)]
        if self.reporter is not None:
            self.reporter.stage_finish(stage, errors, warnings, self.datasource.name if self.datasource else None)
        console(f"cloudseed: stage {stage} finished in {elapsed:.2f}s "
                f"({len(modules)} modules, {len(errors)} errors)")
        return 1 if errors else 0
