"""The boot stages as functions over a small ``BootState``, and the one way they run (``run_stages``).

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

    from cloudseed.agent.boot.handoff import AtOnce, Gate
    from cloudseed.agent.boot.prepared_stage import PreparedStage
    from cloudseed.agent.datasources import Datasource

LOG = logging.getLogger("cloudseed.stages")

STAGES = ("local", "network", "config", "final")
MODULE_STAGES = {"config": "config", "final": "final"}
MODULE_STAGE_OF = {"init": "network", "config": "config", "final": "final"}  # module list -> boot stage

__all__ = ["STAGES", "Agent", "BootState", "after_local", "run_all", "run_handed_off", "run_local", "run_modules",
           "run_network", "run_own_stage", "run_single", "run_stages"]


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
        if state.background:  # e.g. resizefs: joined here unless the config stage of this process will
            errors.extend(_joined(state, now=not state.joined_later))
        warnings.extend(ctx.warnings)
        errors.extend(f"{r['name']}: {r.get('reason', 'failed')}" for r in results if r["status"] == "failed")
        state.recorded(errors, instance_data.save, state.paths, ctx.instance_data)  # with the host keys added
        _resume_host_keys(ctx, warnings)
        state.network_ctx = ctx
    except Exception as e:
        LOG.error("network stage failed", exc_info=not isinstance(e, OSError))  # a full disk is no bug
        state.status.crash("network", f"network stage: {type(e).__name__}: {e}")
        return 1
    return state.end("network", started, errors, warnings, results)


def _resume_host_keys(ctx: ModuleContext, warnings: list[str]) -> None:
    """A host key made in the background at an earlier boot and cut off by a reboot before it was
    installed (``hostkeys.PENDING_FILE``) is started again, at every boot until it lands: the ssh
    module that would make it runs once per instance. sshd serves it once it is in place."""
    from cloudseed.agent import hostkeys

    if not any(ctx.root.exists(hostkeys.pending_path(t)) for t in hostkeys.SLOW_TYPES):
        return  # every reboot but one that cut a key off: two file checks, no distro looked up
    try:
        resumed = hostkeys.resume_interrupted(ctx.root, ctx.distro.ssh_keys_group)
    except OSError as e:
        warnings.append(f"host keys: an interrupted key could not be started again: {e}")
        return
    for keytype in resumed:
        LOG.warning("the %s host key was still being generated when the machine last went down; generating "
                    "it again in the background (sshd serves it when it is in place)", keytype)


def _joined(state: BootState, now: bool) -> list[str]:
    """The failures of what modules left running (``modules/_background.py``), once each; with
    ``now`` all of it is waited for first."""
    from cloudseed.agent.modules import _background

    if now:
        _background.join_before(state.background)
    return _background.problems(state.background)


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
        ctx.background = state.background  # one module alone (``single``) leaves nothing running
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
def run_modules(state: BootState, stage: str, prepared: PreparedStage | None = None) -> int:
    """``prepared``: the stage's files read while its unit waited (``prepared_stage.py``), used only
    when they are still the files the stage would read."""
    if stage not in MODULE_STAGES:
        raise ValueError(f"unknown module stage {stage!r} (config or final)")
    return state.guarded(stage, lambda: _modules_stage(state, stage, prepared))


def _modules_stage(state: BootState, stage: str, prepared: PreparedStage | None = None) -> int:
    # what the network stage's modules left running (resizefs) is waited for before anything of this
    # stage, even one that runs nothing; its failure is this stage's error (logged either way)
    left = _joined(state, now=True) if state.background else []
    reason = state.disabled_reason()
    if reason:
        state.status.mark_disabled(reason)
        return 0
    stopped = state.strict_stopped(stage)
    if stopped is not None:
        return stopped
    errors: list[str] = left
    warnings: list[str] = []
    if prepared is not None and not prepared.holds(state):
        prepared = None
    cfg, trusted = (prepared.cfg, True) if prepared is not None else _combined_config(state, warnings)
    state.redirect_output(stage, cfg, warnings)
    try:
        return _run_modules(state, stage, cfg, errors, warnings, provisional=not trusted, prepared=prepared)
    finally:
        state.restore_output()


def _run_modules(state: BootState, stage: str, cfg: dict, errors: list[str], warnings: list[str],
                 provisional: bool = False, prepared: PreparedStage | None = None) -> int:
    started = state.begin(stage)
    results: list[dict] = []
    try:
        state.datasource = prepared.datasource if prepared is not None else _datasource_for_modules(state)
        state.update_reporting(cfg, stage)
        data = prepared.data if prepared is not None else _stage_instance_data(state, cfg, errors)
        ctx = _module_context(state, stage, cfg, data)
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


# ---------------------------------------------------------------------- the one sequence
def run_stages(state: BootState, gate: Gate | AtOnce, stages: tuple[str, ...] = STAGES) -> int:
    """Run ``stages`` (consecutive, from ``STAGES``) in order in this process, each one after the
    local stage when ``gate`` lets it; the highest stage exit code. Every way a stage runs is this:

    - ``cloudseed boot --hand-off`` (the boot: ``cloudseed-local.service``): all four with a
      ``handoff.Gate``, each later stage when its unit asks (``run_handed_off``);
    - ``cloudseed boot`` (images without systemd, tests, an offline root): all four with
      ``handoff.AtOnce``, a gate that never waits (``run_all``);
    - the per-unit fallback, when the boot's process is gone: the same sequence entered at the
      unit's one stage (``cloudseed init [--local]``, ``cloudseed modules --mode ...``; and the
      local stage alone in the boot's process when its gate cannot open, a full /run).

    After the local stage the gate hears that it is done (``READY=1`` for a Gate: networking may
    start); a disabled agent runs nothing more (the gate hears 0 for each later stage). Whatever
    the gate, sshd's order for the next boot is recorded when a whole boot ran here.

    The boot's performance choices are applied here and nowhere else (how each works:
    ``performance.py``, ``stage_local.after_local``; figures: docs/lab.md, TCG lab VM):
    - after ``READY=1``, so networking does not wait for them, always: **host keys** of a new
      instance start in the background (ecdsa and ed25519 at niceness 0, RSA at 10: RSA at 0
      slowed every first boot by seconds, and two fast keys at the unit's -5 delayed
      ``network-pre.target`` by up to 1 s), and the **read-ahead** of the network stage's files
      (a cold ``import yaml`` took 1.1-2.1 s, read ahead 0.55 s, warm 0.35 s);
    - with a paced gate only (one that waits for units: an at-once run has no idle time to fill
      and no unit's priority to leave, and a test's process keeps its own): **preloading**, while
      networking comes up, of the later stages' imports, nothing run (about 0.5 s of a reboot's
      0.7 s network stage, on the path to sshd, done before it; config and final modules at
      niceness 10, in idle time only); **priorities**: the network stage, which sshd waits for,
      at no lower than the ordinary priority (a reboot's process starts at niceness 10 so its
      local stage does not slow udev's coldplug, which networking settles on), config at niceness
      10 (it starts with sshd, which ``multi-user.target`` and so the final stage wait for) and
      final at the ordinary priority;
    - with a paced gate, between the config stage and the final unit's start: the final stage's
      **files read ahead** (merged configuration, instance data; ``prepared_stage.py``), which the
      stage then uses if they are still the same files: on a reboot 4-22 ms of the 150-200 ms
      between ``multi-user.target`` and the final message under TCG.
    """
    codes: list[int] = []
    prepared = None
    for stage in stages:
        if stage == "local":
            codes.append(run_local(state))
            disabled = state.disabled_reason()
            gate.ready("local stage done; later stages in their own units" if stages == ("local",)
                       else f"disabled: {disabled}" if disabled else "local stage done")
            if disabled:
                for later in stages[1:]:
                    gate.done(later, 0)
                return max(codes)
            after_local(state)  # host keys and read-ahead: networking need not wait for them
            if gate.paced and len(stages) > 1:
                from cloudseed.agent.boot import performance  # read ahead by after_local: not on the local path

                performance.preload_later_stages(state, gate)
            continue
        if gate.paced and stage == "final" and not gate.asked(stage):
            from cloudseed.agent.boot.prepared_stage import prepare

            prepared = prepare(state)  # read while multi-user.target is reached; nothing run
        gate.wait_for(stage)
        if gate.paced:
            from cloudseed.agent.boot import performance

            if stage == "network":
                performance.early_stage_priority()
            elif stage == "config":
                performance.config_stage_priority()
            else:
                performance.final_stage_priority()
        state.joined_later = stage == "network" and stage != stages[-1]  # the config stage follows here
        code = run_network(state) if stage == "network" else run_modules(state, stage, prepared)
        gate.done(stage, code)
        codes.append(code)
    if stages == STAGES:
        _record_sshd_order(state)  # after the final unit is done: nothing waits for it
    return max(codes)


def run_all(state: BootState) -> int:
    """All four stages in this one process, at once."""
    from cloudseed.agent.boot.handoff import AtOnce

    return run_stages(state, AtOnce())


def run_handed_off(state: BootState) -> int:
    """All four stages in this process, each later one when its unit asks (see ``handoff.py``)."""
    from cloudseed.agent.boot.handoff import Gate

    gate = Gate(state.root)
    try:
        gate.open()
    except OSError as e:  # a full /run: the later units find no process to hand to and run their stages
        LOG.error("no hand-off this boot (%s): each later stage runs in its unit's own process", e)
        return run_stages(state, gate, ("local",))
    return run_stages(state, gate)


def run_own_stage(state: BootState, stage: str) -> int:
    """One stage in this process, for its unit (the per-unit fallback) or a person."""
    from cloudseed.agent.boot.handoff import AtOnce

    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r} ({', '.join(STAGES)})")
    return run_stages(state, AtOnce(), (stage,))


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
