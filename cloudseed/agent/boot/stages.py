"""The boot stages as functions over a small ``BootState``, and all four in one process.

local:   (``stage_local.py``) find a datasource that needs no network, decide whether this is a
         new instance, write the network configuration before networking starts.
network: find a network datasource if none was found, process user-data and vendor-data,
         run boothooks and the init modules.
config:  the config modules.        final: the final modules (user scripts, final message).
A stage never raises: problems are logged, recorded in status, and the stage carries on.
Instance data is built once per stage, from the datasource in use.
"""

from __future__ import annotations

import logging

from cloudseed.agent.boot.boot_state import BootState
from cloudseed.agent.boot.instances import adopt, find, load_datasource
from cloudseed.agent.boot.stage_local import after_local, run_local
from cloudseed.agent.datasources import NETWORK
from cloudseed.agent.modules import STAGE_LIST_KEYS, ModuleContext, run_module, run_stage_modules
from cloudseed.agent.state import ensure_dirs, write_json
from cloudseed.agent.state import instance_data_json as instance_data
from cloudseed.agent.state.files import load_json, object_problem
from cloudseed.agent.state.log import console
from cloudseed.core.root import TargetRoot
from cloudseed.core.values import get_list

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:

    from cloudseed.agent.datasources import Datasource

LOG = logging.getLogger("cloudseed.stages")

MODULE_STAGES = {"config": "config", "final": "final"}
MODULE_STAGE_OF = {"init": "network", "config": "config", "final": "final"}  # module list -> boot stage

__all__ = ["Agent", "BootState", "after_local", "run_all", "run_handed_off", "run_local", "run_modules", "run_network",
           "run_single"]


# ---------------------------------------------------------------------- network
def run_network(state: BootState) -> int:
    return state.guarded("network", lambda: _network_stage(state))


def _network_stage(state: BootState) -> int:
    reason = state.disabled_reason()
    if reason:
        state.status.mark_disabled(reason)
        return 0
    stopped = state.strict_stopped("network")
    if stopped is not None:
        return stopped
    errors: list[str] = []
    warnings: list[str] = []
    state.redirect_output("network", state.system_cfg, warnings)
    try:
        return _run_network(state, errors, warnings)
    finally:
        state.restore_output()


def _run_network(state: BootState, errors: list[str], warnings: list[str]) -> int:
    started = state.begin("network")
    results: list[dict] = []
    try:
        state.recorded(errors, ensure_dirs, state.paths)
        ds = state.datasource  # found by the local stage of this process (recorded or not: a full disk)
        if ds is None and state.root.exists(state.paths.boot_datasource_file):
            ds = load_datasource(state, last_instance=False)  # this boot's, or a fresh search
        if ds is None:
            ds = find(state, NETWORK, errors)
            if ds is None:
                ds = _none_datasource(state)
                warnings.append("no datasource found; using the None datasource")
            state.recorded(errors, adopt, state, ds)
            warnings.extend(getattr(ds, "warnings", []))
            errors.extend(getattr(ds, "errors", []))  # e.g. Azure: the VM not reported ready
        state.datasource = ds
        data = instance_data.build(state.root, ds, None)
        cfg = _consume_userdata(state, data, errors, warnings)
        state.redirect_output("network", cfg, warnings)  # user-data may say where output goes
        state.update_reporting(cfg, "network")  # vendor-data or user-data may say where events go
        instance_data.with_config(data, cfg)
        state.recorded(errors, instance_data.save, state.paths, data)  # before the modules: they may query it
        ctx = _module_context(state, "init", cfg, data)
        results = [r.to_json() for r in run_stage_modules(ctx, get_list(cfg, STAGE_LIST_KEYS["init"]))]
        warnings.extend(ctx.warnings)
        errors.extend(f"{r['name']}: {r.get('reason', 'failed')}" for r in results if r["status"] == "failed")
        state.recorded(errors, instance_data.save, state.paths, ctx.instance_data)  # with the host keys added
        state.network_ctx = ctx
    except Exception as e:
        LOG.error("network stage failed", exc_info=not isinstance(e, OSError))  # a full disk is no bug
        state.status.crash("network", f"network stage: {type(e).__name__}: {e}")
        return 1
    return state.end("network", started, errors, warnings, results)


def _none_datasource(state: BootState) -> Datasource:
    from cloudseed.agent.datasources.none import NoneDatasource

    ds = NoneDatasource(state.ds_context(NETWORK))
    ds.fetch()
    return ds


def _consume_userdata(state: BootState, data: dict, errors: list[str], warnings: list[str]) -> dict:
    """Process user-data and vendor-data, place scripts and boothooks, return the merged config."""
    from cloudseed.agent.boot.userdata_stage import consume

    system_cfg, state.system_cfg = state.system_cfg, state.plain_cfg  # later stages get no --file settings
    try:
        cfg = consume(state, data, errors, warnings)
    finally:
        state.system_cfg = system_cfg
    state.recorded(errors, write_json, state.root, state.paths.combined_config_file, cfg, 0o600)
    return state.with_files(cfg)


def _module_context(state: BootState, stage: str, cfg: dict, data: dict) -> ModuleContext:
    iid = state.instance_id or "iid-datasource-none"
    ctx = ModuleContext(root=state.root, paths=state.paths, cfg=cfg, instance_id=iid, stage=stage,
                        datasource=state.datasource, instance_data=data, system_cfg=state.system_cfg)
    if state.reporter is not None:
        state.reporter.add_instance_data(data)  # the datasource's secrets stay out of events too
        ctx.reporter = state.reporter
    if stage != "single":
        ctx.on_failure = lambda result: state.module_failed(MODULE_STAGE_OF[stage], result.name, result.reason)
    return ctx


def _combined_config(state: BootState, warnings: list[str]) -> tuple[dict, bool]:
    """This boot's merged config, and whether it holds the user's cloud-config.

    When it is missing or damaged it is rebuilt from the instance's cloud-config (kept by the network
    stage); failing that, the system config alone (False: the modules then run, but no per-instance
    module is recorded as done, so the next boot with the user's config runs them again).
    """
    cfg = load_json(state.root, state.paths.combined_config_file, object_problem)
    if isinstance(cfg, dict):
        return state.with_files(cfg), True
    iid = state.record.get("instance_id")
    idir = state.paths.instance_dir(iid) if isinstance(iid, str) and iid else state.paths.instance_link
    kept = load_json(state.root, f"{idir}/cloud-config.json", object_problem)
    if isinstance(kept, dict):
        from cloudseed.agent.config import merge_config

        warnings.append("no processed user-data from this boot; the instance's cloud-config "
                        "(kept by its network stage) over the system config")
        return state.with_files(merge_config(state.plain_cfg, kept)), True
    warnings.append("no processed user-data from this boot; using the system config only "
                    "(per-instance modules run again at the next boot)")
    return dict(state.system_cfg), False



def _stage_instance_data(state: BootState, cfg: dict, errors: list[str]) -> dict:
    """This boot's instance data when it describes the datasource in use; else built anew and written."""
    data = instance_data.load(state.paths, repair=True)
    if instance_data.describes(data, state.datasource):
        return data
    data = instance_data.with_config(instance_data.build(state.root, state.datasource, None), cfg)
    state.recorded(errors, instance_data.save, state.paths, data)
    return data


def _datasource_for_modules(state: BootState) -> Datasource | None:
    if state.datasource is not None and state.record.get("instance_id") in (None, state.datasource.instance_id):
        return state.datasource  # found by an earlier stage of this process (unrecorded: a full disk)
    return load_datasource(state)


# ---------------------------------------------------------------------- config / final
def run_modules(state: BootState, stage: str) -> int:
    if stage not in MODULE_STAGES:
        raise ValueError(f"unknown module stage {stage!r} (config or final)")
    return state.guarded(stage, lambda: _modules_stage(state, stage))


def _modules_stage(state: BootState, stage: str) -> int:
    reason = state.disabled_reason()
    if reason:
        state.status.mark_disabled(reason)
        return 0
    stopped = state.strict_stopped(stage)
    if stopped is not None:
        return stopped
    errors: list[str] = []
    warnings: list[str] = []
    cfg, trusted = _combined_config(state, warnings)
    state.redirect_output(stage, cfg, warnings)
    try:
        return _run_modules(state, stage, cfg, errors, warnings, provisional=not trusted)
    finally:
        state.restore_output()


def _run_modules(state: BootState, stage: str, cfg: dict, errors: list[str], warnings: list[str],
                 provisional: bool = False) -> int:
    started = state.begin(stage)
    results: list[dict] = []
    try:
        state.datasource = _datasource_for_modules(state)
        state.update_reporting(cfg, stage)
        ctx = _module_context(state, stage, cfg, _stage_instance_data(state, cfg, errors))
        ctx.provisional = provisional
        results = [r.to_json() for r in run_stage_modules(ctx, get_list(cfg, STAGE_LIST_KEYS[stage]))]
        warnings.extend(ctx.warnings)
        errors.extend(f"{r['name']}: {r.get('reason', 'failed')}" for r in results if r["status"] == "failed")
    except Exception as e:
        LOG.error("%s stage failed", stage, exc_info=not isinstance(e, OSError))
        state.status.crash(stage, f"{stage} stage: {type(e).__name__}: {e}")
        return 1
    return state.end(stage, started, errors, warnings, results)


def run_single(state: BootState, name: str, frequency: str | None) -> int:
    """Run one module now (``cloudseed single``), honouring or overriding its frequency.

    A name that is neither cloudseed's module nor cloud-init's exits 1 with a did-you-mean (cloud-init
    24.x-26.x: "Did not run X, does it exist?", exit 1), before anything is loaded.
    """
    from cloudseed.agent.config.known_keys import MODULES
    from cloudseed.agent.modules import all_module_names, canonical_name

    ours = all_module_names()
    if canonical_name(name) not in ours and canonical_name(name) not in MODULES:
        from cloudseed.agent.config.schema import suggest

        console(f"cloudseed: no module named {name!r}{suggest(canonical_name(name), ours)}")
        return 1
    state.datasource = load_datasource(state)
    warnings: list[str] = []
    cfg, _trusted = _combined_config(state, warnings)
    ctx = _module_context(state, "single", cfg, _stage_instance_data(state, cfg, warnings))
    result = run_module(ctx, name, frequency)
    console(f"cloudseed: module {result.name}: {result.status}" + (f" ({result.reason})" if result.reason else ""))
    return 1 if result.status == "failed" else 0


def run_all(state: BootState) -> int:
    """All four stages in this one process (the fast path)."""
    codes = [run_local(state)]
    if state.disabled_reason():
        return 0
    after_local(state)
    codes.append(run_network(state))
    codes.append(run_modules(state, "config"))
    codes.append(run_modules(state, "final"))
    _record_sshd_order(state)
    return max(codes)


def run_handed_off(state: BootState) -> int:
    """All four stages in this process, each later one when its unit asks (see ``handoff.py``)."""
    from cloudseed.agent.boot.handoff import LATER_STAGES, Gate, notify_ready

    gate = Gate(state.root)
    try:
        gate.open()
    except OSError as e:  # a full /run: the later units find no process to hand to and run their stages
        LOG.error("no hand-off this boot (%s): each later stage runs in its unit's own process", e)
        code = run_local(state)
        notify_ready("local stage done; later stages in their own units")
        after_local(state)
        return code
    codes = [run_local(state)]
    disabled = state.disabled_reason()
    notify_ready("local stage done" if not disabled else f"disabled: {disabled}")
    if disabled:
        for stage in LATER_STAGES:
            gate.done(stage, 0)
        return 0
    after_local(state)  # host keys and read-ahead: networking need not wait for them
    from cloudseed.agent.boot import performance  # read ahead by after_local: not on the local stage's path

    performance.preload_later_stages(state, gate)
    for stage in LATER_STAGES:
        gate.wait_for(stage)
        if stage == "network":
            performance.early_stage_priority()
        elif stage == "config":
            performance.ordinary_priority()
        code = run_network(state) if stage == "network" else run_modules(state, stage)
        gate.done(stage, code)
        codes.append(code)
    _record_sshd_order(state)  # after the final unit is done: nothing waits for it
    return max(codes)


def _record_sshd_order(state: BootState) -> None:
    """What the next boot's generator reads to order sshd (``sshd_order.py``), at the end of the boot
    (every stage's modules have run, their semaphores say what runs again); never fails the boot."""
    from cloudseed.agent.boot import sshd_order

    try:
        if state.network_ctx is not None and not state.disabled_reason():
            sshd_order.record(state, state.network_ctx, state.network_ctx.cfg)
        else:
            sshd_order.forget(state)
    except Exception as e:  # the next boot then orders sshd as on a first boot
        LOG.warning("the record for the next boot's sshd order was not written: %s: %s", type(e).__name__, e)
        try:
            sshd_order.forget(state)
        except OSError:
            pass


class Agent:
    """The stage functions bound to one root (for callers that hold one object per boot)."""

    def __init__(self, root: TargetRoot, files_cfg: dict | None = None):
        self.state = BootState.load(root, files_cfg)

    def run_local(self) -> int:
        return run_local(self.state)

    def run_network(self) -> int:
        return run_network(self.state)

    def run_modules(self, stage: str) -> int:
        return run_modules(self.state, stage)

    def run_single(self, name: str, frequency: str | None) -> int:
        return run_single(self.state, name, frequency)

    def run_all(self) -> int:
        return run_all(self.state)
