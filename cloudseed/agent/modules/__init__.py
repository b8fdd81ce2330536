"""The module framework: what a module declares, how a stage's module list is run.

A module is one file here named after it (``write_files.py``) that sets ``MODULE`` to a
``ModuleSpec`` (name, default stage and frequency, the config keys that activate it, the
distros it supports, its JSON-schema fragment) and defines ``handle(ctx)``. Module lists come
from the config (``cloud_init_modules`` ...); cloud-init's spellings (``write-files``,
``cc_write_files``) are accepted, and an entry may override the frequency
(``- [runcmd, always]``). A failing module is recorded and the stage goes on.
"""

from __future__ import annotations

import importlib
import logging
import time

from cloudseed.agent.state import PER_BOOT, PER_INSTANCE, Paths, Semaphores, normalize_frequency
from cloudseed.core.root import TargetRoot

TYPE_CHECKING = False  # typing and dataclasses are not imported at boot
if TYPE_CHECKING:
    from typing import Any, Callable

LOG = logging.getLogger("cloudseed.modules")

STAGE_INIT = "init"
STAGE_CONFIG = "config"
STAGE_FINAL = "final"
STAGE_LIST_KEYS = {
    STAGE_INIT: "cloud_init_modules",
    STAGE_CONFIG: "cloud_config_modules",
    STAGE_FINAL: "cloud_final_modules",
}


class ModuleSpec:
    """What a module declares about itself."""

    __slots__ = ("name", "stage", "frequency", "activate_by", "distros", "schema", "title", "examples")

    def __init__(self, name: str, stage: str, frequency: str = PER_INSTANCE, activate_by: tuple[str, ...] = (),
                 distros: tuple[str, ...] = (), schema: dict | None = None, title: str = "",
                 examples: tuple[str, ...] = ()):
        self.name = name
        self.stage = stage
        self.frequency = frequency
        self.activate_by = tuple(activate_by)  # run only when one of these keys is configured; () = always
        self.distros = tuple(distros)  # distro families ("debian", "rhel") or os-release IDs ("ubuntu"); () = all
        self.schema = schema or {}  # {"properties": {...}} for the keys it owns
        self.title = title
        # cloud-config documents (YAML text) that show the module's keys; each is validated against
        # the schema and run in a temporary root by the tests, and printed in the module reference
        self.examples = tuple(examples)

    def __repr__(self) -> str:
        return f"ModuleSpec({self.name!r}, stage={self.stage!r}, frequency={self.frequency!r})"


class ModuleError(Exception):
    """A module could not do what the config asked; the message names the key."""


class ModuleContext:
    """Everything a module may use: the root, the merged config, the instance, the distro."""

    def __init__(self, root: TargetRoot, paths: Paths, cfg: dict, instance_id: str, stage: str,
                 datasource: Any = None, instance_data: dict | None = None, system_cfg: dict | None = None):
        self.root = root
        self.paths = paths
        self.cfg = cfg
        # the image's own configuration, without vendor-data and user-data: for the few settings
        # that bound what user-data may do, which user-data itself must not change
        self.system_cfg = cfg if system_cfg is None else system_cfg
        self.instance_id = instance_id
        self.stage = stage
        self.datasource = datasource  # cloudseed.agent.datasources.Datasource, or None offline
        self.instance_data = instance_data if instance_data is not None else {}
        self.warnings: list[str] = []
        self.module_name = ""
        self._distro: Any = None
        # set by the running module (reset for each one): why the machine must reboot now (the rest of
        # the stage waits for the next boot), and why the module must run again at the next boot (its
        # semaphore is not marked); user scripts ask for both with exit codes 1001-1003 (script_exits.py)
        self.reboot = ""
        self.again = ""
        self.reporter: Any = None  # cloudseed.agent.reporting.Reporter when events are reported
        # the running module's record of the parts of its work already done (``done_before``)
        self.parts: Any = None
        # the config lacks this boot's user-data (it could not be read): modules run, none is marked done
        self.provisional = False
        # called with each failed module's ModuleResult as it fails (a boot's stages: strict mode)
        self.on_failure: Any = None
        # the boot's commands modules left running beside the modules after them (``_background.py``):
        # a list shared by the boot's stages; None where nothing may be left running (one module alone)
        self.background: list | None = None

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"cloudseed.modules.{self.module_name or 'core'}")

    @property
    def distro(self):
        """The distro family object for the target root (imported on first use)."""
        if self._distro is None:
            from cloudseed.agent.distros import get_distro

            self._distro = get_distro(self.root, self.cfg)
        return self._distro

    @property
    def instance_dir(self) -> str:
        return self.paths.instance_dir(self.instance_id)

    def warn(self, message: str) -> None:
        """A recoverable problem: logged, and shown in status as a warning of this module."""
        text = f"{self.module_name}: {message}" if self.module_name else message
        self.log.warning("%s", message)
        self.warnings.append(text)

    def done_before(self, part: str) -> bool:
        """Was ``part`` of this module's work (an entry, named by its content) done by an earlier run?

        A module that failed part-way runs again at the next boot; what it did then is not done twice
        (a ``write_files`` append is appended once per instance). Forgotten when the module succeeds.
        """
        return self.parts is not None and self.parts.done(part)

    def record_done(self, part: str, durable: bool = False) -> bool:
        """Remember that ``part`` is done (an empty file: it fits on a nearly full disk); False if it could not.

        ``durable`` for a part a repeat would harm (an append). True with nothing recorded when the module
        runs outside the framework (nothing to remember for)."""
        if self.parts is None:
            return True
        try:
            self.parts.record(part, durable)
            return True
        except Exception as e:  # noqa: BLE001 - the work itself is done; a repeat is the cost
            self.log.warning("cannot record that a part of %s is done: %s", self.module_name, e)
            return False

    def forget_done(self, part: str) -> None:
        if self.parts is not None:
            try:
                self.parts.forget(part)
            except Exception:  # noqa: BLE001,S110 - best effort
                pass

    def console(self, message: str, secret: bool = False) -> None:
        """A line for the console; ``secret`` (a generated password): the console only, never a log."""
        from cloudseed.agent.state.log import console

        console(message, secret=secret)


class ModuleResult:
    """How one module's run went: "ok", "failed" or "skipped", with why and how long."""

    def __init__(self, name: str, status: str, seconds: float = 0.0, reason: str = "", frequency: str = ""):
        self.name = name
        self.status = status
        self.seconds = seconds
        self.reason = reason
        self.frequency = frequency
        # the exception type when the module failed with something other than ModuleError (a bug,
        # or a system state it did not expect); "" otherwise
        self.crash = ""
        self.reboot = ""  # why the module asked for a reboot now (the stage stops after it)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status, "seconds": round(self.seconds, 4)}
        if self.reason:
            out["reason"] = self.reason
        if self.frequency:
            out["frequency"] = self.frequency
        if self.reboot:
            out["reboot"] = self.reboot
        return out


def canonical_name(name: str) -> str:
    """``write-files`` / ``cc_write_files`` / ``Write_Files`` -> ``write_files``."""
    text = str(name).strip().lower().replace("-", "_")
    return text[3:] if text.startswith("cc_") else text


def load_module(name: str) -> tuple[ModuleSpec, Callable[[ModuleContext], None]]:
    """The declaration and handler of module ``name``; ImportError when cloudseed has none."""
    module = importlib.import_module(f"{__name__}.{canonical_name(name)}")
    return module.MODULE, module.handle


def _loaded(canon: str) -> tuple[ModuleSpec, Callable[[ModuleContext], None]] | ModuleResult:
    """The module imported, or the result saying why it cannot run (not ours, or broken)."""
    try:
        return load_module(canon)
    except ImportError as e:
        if getattr(e, "name", "") and not str(e.name).endswith(canon):
            LOG.error("module %s could not be loaded: %s", canon, e)
            return ModuleResult(canon, "failed", reason=f"cannot load: {e}")
        LOG.info("module %s is not provided by cloudseed; skipped", canon)
        return ModuleResult(canon, "skipped", reason="not provided by cloudseed")


def _declared_only(canon: str) -> ModuleSpec | None:
    """What ``_declared.py``'s table says of module ``canon`` (no import), or None when it has no row
    (schema, title and examples are left out: only what decides whether the module runs)."""
    from cloudseed.agent.modules._declared import TABLE

    row = TABLE.get(canon)
    if row is None:
        return None
    stage, frequency, activate_by, distros = row
    return ModuleSpec(canon, stage, frequency, activate_by, distros)


def declared_spec(name: str) -> ModuleSpec:
    """Module ``name``'s declaration: from ``_declared.py``'s table (no import) when it has it, else
    imported; ImportError when cloudseed has no such module. Enough to tell whether it runs."""
    return _declared_only(canonical_name(name)) or load_module(name)[0]


def all_module_names() -> list[str]:
    """Every module this package provides (imports nothing)."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def parse_entry(entry: Any) -> tuple[str, str | None, list]:
    """A module-list entry as (name, frequency override or None, extra args)."""
    if isinstance(entry, str):
        return entry, None, []
    if isinstance(entry, (list, tuple)) and entry:
        freq = normalize_frequency(entry[1]) if len(entry) > 1 and entry[1] else None
        return str(entry[0]), freq, list(entry[2:])
    if isinstance(entry, dict) and entry.get("name"):
        freq = normalize_frequency(entry["frequency"]) if entry.get("frequency") else None
        return str(entry["name"]), freq, []
    raise ValueError(f"cannot read module list entry {entry!r}")


def is_active(spec: ModuleSpec, cfg: dict) -> bool:
    return not spec.activate_by or any(cfg.get(k) not in (None, "", [], {}) for k in spec.activate_by)


def supports(spec: ModuleSpec, distro: Any) -> bool:
    """Whether ``spec`` runs on ``distro``: ``distros`` names families ("debian") or os-release IDs
    ("ubuntu"; an ``ID_LIKE`` word counts, so "suse" covers openSUSE Leap and SLES)."""
    if not spec.distros or distro.family in spec.distros or distro.id in spec.distros:
        return True
    like = getattr(distro, "os_release", {}).get("ID_LIKE", "").split()
    return any(word in spec.distros for word in like)


def run_module(ctx: ModuleContext, name: str, frequency: str | None = None,
               force: bool = False) -> ModuleResult:
    """Run one module honouring activation, distro support and frequency; never raises.

    Whether it runs is decided from its declaration in ``_declared.py`` when that table has it: a
    module that is skipped is not imported (imports were most of a reboot's module time)."""
    canon = canonical_name(name)
    handle = None
    spec = _declared_only(canon)
    if spec is None:
        loaded = _loaded(canon)
        if isinstance(loaded, ModuleResult):
            return loaded
        spec, handle = loaded
    freq = frequency or spec.frequency
    result = ModuleResult(spec.name, "skipped", frequency=freq)
    if not is_active(spec, ctx.cfg):
        result.reason = "no configuration for it"
        return result
    if spec.distros and not supports(spec, ctx.distro):
        # configured, but for another system: said in the status (degraded), never silently skipped
        result.reason = (f"not applicable to {ctx.distro.id} ({ctx.distro.family} family): "
                         f"{spec.name} is for {', '.join(spec.distros)}")
        configured = [k for k in spec.activate_by if ctx.cfg.get(k) not in (None, "", [], {})]
        if configured:
            ctx.warnings.append(f"{spec.name}: {', '.join(configured)} not applied: {result.reason}")
        return result
    sems = Semaphores(ctx.paths, ctx.instance_id)
    if not force and sems.has_run(spec.name, freq):
        result.reason = f"already ran ({freq})"
        if ctx.reporter is not None:
            ctx.reporter.module_finish(ctx.stage, result, [])
        return result
    if handle is None:
        loaded = _loaded(canon)
        if isinstance(loaded, ModuleResult):
            return loaded
        spec, handle = loaded
    if ctx.background:
        from cloudseed.agent.modules._background import join_before

        join_before(ctx.background, spec.name, ctx.cfg)  # what earlier modules left running, unless beside it
    ctx.module_name = spec.name
    ctx.reboot = ctx.again = ""
    ctx.parts = sems.parts(spec.name, freq)
    warned = len(ctx.warnings)
    if ctx.reporter is not None:
        ctx.reporter.module_start(ctx.stage, spec.name, freq)
    started = time.monotonic()
    try:
        handle(ctx)
        result.status = "ok"
    except ModuleError as e:
        result.status, result.reason = "failed", str(e)
        LOG.error("module %s failed: %s", spec.name, e)
    except Exception as e:  # a bug or an unexpected system state: record and go on
        result.status, result.reason = "failed", f"{type(e).__name__}: {e}"
        result.crash = type(e).__name__
        # a full or read-only disk is the system's state, named in the message; anything else a bug
        LOG.error("module %s failed: %s: %s", spec.name, type(e).__name__, e, exc_info=not isinstance(e, OSError))
    finally:
        result.seconds = time.monotonic() - started
        ctx.module_name = ""
    result.reboot = ctx.reboot
    if result.status == "ok" and ctx.again:
        result.reason = ctx.again
    if result.status == "ok" and ctx.provisional and freq != PER_BOOT:
        result.reason = "ran without this boot's user-data: not recorded as done, it runs again at the next boot"
    elif result.status == "ok" and not (ctx.again or ctx.reboot):  # else it goes on at the next boot
        try:
            sems.mark(spec.name, freq)
            ctx.parts.clear()
        except Exception as e:  # noqa: BLE001 - a full or read-only disk: the module is not marked
            result.status = "failed"
            result.crash = type(e).__name__
            result.reason = f"done, but it could not be recorded as done (it runs again at the next boot): {e}"
            LOG.error("module %s: %s", spec.name, result.reason)
    ctx.parts = None
    if ctx.reporter is not None:
        ctx.reporter.module_finish(ctx.stage, result, ctx.warnings[warned:])
    return result


def run_stage_modules(ctx: ModuleContext, entries: list) -> list[ModuleResult]:
    """Run a stage's module list in order; each result is logged and returned."""
    results: list[ModuleResult] = []
    seen: set[str] = set()
    reboot_by = ""
    for entry in entries:
        try:
            name, freq, _args = parse_entry(entry)
        except ValueError as e:
            results.append(ModuleResult(str(entry), "failed", reason=str(e)))
            continue
        if canonical_name(name) in seen:
            continue
        seen.add(canonical_name(name))
        if reboot_by:  # a module asked for a reboot now: the rest runs after it (nothing marked)
            why = f"after the reboot {reboot_by} asked for"
            results.append(ModuleResult(canonical_name(name), "skipped", reason=why))
            continue
        result = run_module(ctx, name, freq)
        reboot_by = result.name if result.reboot else ""
        if reboot_by and ctx.background:  # nothing is left running into the reboot
            from cloudseed.agent.modules._background import join_before

            join_before(ctx.background)
        LOG.info("module %s: %s%s (%.3fs)", result.name, result.status,
                 f" ({result.reason})" if result.reason else "", result.seconds)
        results.append(result)
        if result.status == "failed" and ctx.on_failure is not None:
            ctx.on_failure(result)
    return results
