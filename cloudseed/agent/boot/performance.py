"""How the boot's performance choices work, each with what it buys (figures: docs/lab.md).

They are applied in one place, ``stages.run_stages`` (which says when each applies). Nothing here
changes what a boot does, only when and at which priority; each choice is measured by
``bench/boot_compare.py`` and ``bench/agent_startup.py``.

- **Preloading** (``preload_later_stages``): between the local stage's ``READY=1`` and the
  network stage, while networking comes up (DHCP; on a reboot ``ifupdown-pre``'s ``udevadm
  settle``), the boot's one process imports what the later stages will, running nothing: under
  TCG about 0.5 s of a reboot's 0.7 s network stage, which is on the path to sshd. The network
  stage's code first at the ordinary priority, then the config and final modules at niceness 10
  (idle time only); it stops as soon as the network stage's unit asks.
- **Priorities** (``early_stage_priority``, ``config_stage_priority``, ``final_stage_priority``): the
  local and network units run at ``Nice=-5``; the network stage (sshd waits for it) never runs below the ordinary
  priority, even on a reboot where the generator's drop-in starts the process at niceness 10 so
  its local stage does not slow udev's coldplug; config runs at niceness 10 (it starts with sshd,
  which ``multi-user.target`` and so the final stage wait for) and final at the ordinary one.
- **Page-cache read-ahead** (``network_stage_files``, ``warm``): early in a boot the page cache is
  cold, and a stage's imports then wait on the disk one small file at a time; in an emulated boot
  importing PyYAML alone took about 1 s cold against 0.4 s warm. The local stage ends seconds
  before the network stage starts, so it asks the kernel (``posix_fadvise(WILLNEED)``, no data
  copied, nothing waited for) to read ahead what the network stage imports: PyYAML and its C
  parts, and the user-data, module and distro packages.
- Host keys generated side by side, RSA at niceness 10, are ``hostkeys.py``'s; the schema check
  and the parsed cloud-config kept for a reboot are ``userdata_stage.py``'s.
"""

from __future__ import annotations

import logging
import os
import sys

from cloudseed.agent.modules import STAGE_LIST_KEYS
from cloudseed.core.values import get_list

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Callable

    from cloudseed.agent.boot.boot_state import BootState
    from cloudseed.agent.boot.handoff import Gate

LOG = logging.getLogger("cloudseed.stages")

# packages of the network stage, relative to the cloudseed package
CLOUDSEED_PACKAGES = ("core", "agent", "agent/boot", "agent/state", "agent/config", "agent/userdata", "agent/modules",
                      "agent/distros")
# standard library modules PyYAML, the schema check and the modules import that the local stage
# does not (measured: tests/agent/test_prefetch.py), and the C extensions behind them (built into
# the interpreter on Debian, separate files in other builds)
STDLIB_MODULES = ("bisect", "datetime", "difflib", "glob", "gzip", "hashlib", "heapq", "hmac", "pkgutil", "queue",
                  "random", "secrets", "shlex", "socket", "concurrent/__init__", "concurrent/futures/__init__",
                  "concurrent/futures/_base", "concurrent/futures/thread")
STDLIB_EXTENSIONS = ("_bisect", "_blake2", "_datetime", "_hashlib", "_heapq", "_queue", "_random", "_sha512",
                     "_socket", "array")


def _files_in(directory: str, suffixes: tuple[str, ...]) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return [entry.path for entry in entries if entry.name.endswith(suffixes) and entry.is_file()]
    except OSError:
        return []


def _modules_of(directory: str, tag: str) -> list[str]:
    """What importing each module of ``directory`` reads: its compiled file, or its source without one."""
    compiled = set(_files_in(os.path.join(directory, "__pycache__"), (tag,)))
    files = []
    for source in _files_in(directory, (".py",)):
        name = os.path.basename(source)[:-3]
        cached = os.path.join(directory, "__pycache__", name + tag)
        files.append(cached if cached in compiled else source)
    return files


def network_stage_files() -> list[str]:
    """The files the network stage will import, where they exist."""
    tag = f".{sys.implementation.cache_tag}.pyc"
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the cloudseed package
    files = []
    for package in CLOUDSEED_PACKAGES:
        files += _modules_of(os.path.join(here, package), tag)
    yaml_dir = os.path.join(os.path.dirname(here), "yaml")  # usually beside cloudseed
    if not os.path.isdir(yaml_dir):
        yaml_dir = next((os.path.join(p, "yaml") for p in sys.path if os.path.isdir(os.path.join(p, "yaml"))), "")
    if yaml_dir:
        files += _modules_of(yaml_dir, tag) + _files_in(yaml_dir, (".so",))
    stdlib = os.path.dirname(os.__file__)
    for module in STDLIB_MODULES:
        directory, name = os.path.split(os.path.join(stdlib, module))
        cached = os.path.join(directory, "__pycache__", name + tag)
        files.append(cached if os.path.exists(cached) else os.path.join(directory, name + ".py"))
    extensions = _files_in(os.path.join(stdlib, "lib-dynload"), (".so",))
    files += [path for path in extensions if os.path.basename(path).split(".")[0] in STDLIB_EXTENSIONS]
    return files


def warm(paths: list[str]) -> int:
    """Ask the kernel to read ``paths`` ahead; returns how many it was asked for."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return 0
    asked = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            asked += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return asked


def preload_later_stages(state: BootState, gate: Gate | None = None) -> None:
    """Import what the later stages will, while networking comes up; run nothing (a new instance's
    user-data is parsed and its cloud-config checked, nothing written: ``userdata_stage.prepare``).

    The process would otherwise sit idle until networking is up (DHCP; on a reboot also
    ``ifupdown-pre``'s ``udevadm settle``), then import on the path to sshd: under TCG about
    0.5 s of a reboot's 0.7 s network stage, and the config stage's imports competed with sshd's
    start. First the network stage's code (user-data processing, the init modules) at the
    ordinary priority, then the config and final modules at niceness 10 (idle time only); it
    stops as soon as the network stage's unit asks, and the stage gets the raised priority back
    (root only: others never change theirs here). Never above the priority the process started
    with: on a provisioned disk (a reboot) the generator's drop-in starts it at niceness 10, and
    everything before the network stage stays there. An import that fails is only logged.
    """
    import importlib

    from cloudseed.agent.modules import load_module, parse_entry

    def asked() -> bool:
        return gate is not None and gate.asked("network")

    def set_niceness(value: int) -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, value)
        except OSError as e:
            LOG.debug("priority left as it is: %s", e)

    root_user = os.geteuid() == 0
    try:
        raised = os.getpriority(os.PRIO_PROCESS, 0)
    except OSError:
        raised, root_user = 0, False
    modules = {stage: get_list(state.system_cfg, STAGE_LIST_KEYS[stage]) for stage in ("init", "config", "final")}
    wanted = None  # which modules are worth importing: known once the user-data is (``_may_run``)
    steps: list[tuple[int, str, Any]] = [
        (0, "import", name) for name in ("cloudseed.agent.userdata", "cloudseed.agent.userdata.includes",
                                         "cloudseed.agent.boot.userdata_stage", "cloudseed.agent.scripts",
                                         # the network stage digests the user-data at every boot
                                         # (``userdata_stage.changed_since_provisioned``) and keys the
                                         # schema check's verdict: OpenSSL's library loads here, not
                                         # beside a reboot's sshd start (~40 ms of a TCG guest's CPU)
                                         "hashlib", "importlib.util",
                                         # the first command the stage runs (a reboot's bootcmd)
                                         # imports subprocess, which the local stage no longer
                                         # does; the stage looks for a cut-off host key at
                                         # every boot (hostkeys): both here, not beside sshd's start
                                         "subprocess", "cloudseed.agent.hostkeys")]
    steps.append((0, "yaml", "yaml"))  # a new instance's cloud-config is parsed; a reboot's is kept
    steps.append((0, "prepare", "user-data"))  # and parsed and checked now (userdata_stage.prepare)
    steps += [(0, "module", entry) for entry in modules["init"]]
    steps += [(10, "module", entry) for entry in modules["config"] + modules["final"]]
    current = raised
    try:
        for niceness, kind, what in steps:
            if asked():
                return
            niceness = max(niceness, raised)
            if root_user and niceness != current:
                set_niceness(niceness)
                current = niceness
            try:
                if kind == "module":
                    if wanted is None:
                        wanted = _may_run(state)
                    if wanted(what):
                        load_module(parse_entry(what)[0])
                elif kind == "import":
                    importlib.import_module(what)
                elif _cloud_config_kept(state):
                    continue
                elif kind == "yaml":
                    importlib.import_module(what)
                else:
                    from cloudseed.agent.boot.userdata_stage import prepare

                    prepare(state)
            except Exception as e:  # the stage itself will report it
                LOG.debug("preloading %r: %s", what, e)
    finally:
        if root_user and current != raised:
            set_niceness(raised)


def _may_run(state: BootState) -> Callable[[Any], bool]:
    """Which module-list entries the stages will probably run (so preloading imports only those):
    not those the table of declarations (``modules/_declared.py``) shows already done for this
    instance (a reboot), nor those whose keys neither the image's configuration nor the user-data's
    cloud-config (parsed by ``userdata_stage.prepare``, or kept in the instance directory from the
    last boot) sets. A wrong guess costs time only: the stage imports what it runs."""
    from cloudseed.agent.modules import _declared, canonical_name, declared_spec, is_active, parse_entry
    from cloudseed.agent.state import Semaphores
    from cloudseed.core.root import RootError

    ds = state.datasource
    sems = Semaphores(state.paths, ds.instance_id if ds is not None else None)
    user = (state.prepared or {}).get("config")
    if user is None and ds is not None and not (ds.vendordata_raw or ds.vendordata2_raw):
        import json

        try:  # the last boot's (the stage rewrites it when it differs; nothing is set aside here)
            user = json.loads(state.root.read_bytes(f"{state.paths.instance_dir(ds.instance_id)}/cloud-config.json"))
        except (OSError, ValueError, RootError):
            user = None
    cfg = {**state.system_cfg, **user} if isinstance(user, dict) else None

    def may_run(entry: Any) -> bool:
        try:
            name, frequency, _ = parse_entry(entry)
        except ValueError:
            return False
        if canonical_name(name) not in _declared.TABLE:
            return True
        spec = declared_spec(name)
        if cfg is not None and not is_active(spec, cfg):
            return False
        return not sems.has_run(spec.name, frequency or spec.frequency)

    return may_run


def _cloud_config_kept(state: BootState) -> bool:
    """Was this instance's cloud-config parsed at an earlier boot (so PyYAML need not load)?"""
    from cloudseed.agent.userdata.kept_yaml import FILE_NAME

    ds = state.datasource
    return ds is not None and state.root.exists(f"{state.paths.instance_dir(ds.instance_id)}/{FILE_NAME}")


def early_stage_priority() -> None:
    """The network stage (on the path to sshd) runs at no lower a priority than the ordinary one.

    On a reboot the generator's drop-in starts the process at niceness 10 (its local stage must
    not slow udev's coldplug); by the network stage networking is up and sshd waits for it.
    """
    _niceness_within(-20, 0)


def config_stage_priority() -> None:
    """The early stages run at a raised priority (the unit's Nice=); the config stage at niceness 10.

    It starts with sshd (both follow the network stage) and nothing waits for it but the final
    stage, which also waits for ``multi-user.target``, that is for sshd: so it leaves a first boot's
    two vCPUs to sshd's start and systemd first (series O and Q: sshd took 0.66-1.06 s to start
    beside it, 0.55-0.66 s without an agent). Its commands run there too."""
    _niceness_within(10, 19)


def final_stage_priority() -> None:
    """The final stage (user scripts, the final message: "boot finished") at the ordinary priority."""
    _niceness_within(0, 0)


def _niceness_within(low: int, high: int) -> None:
    """Move this process's niceness into ``low..high`` (raising priority needs root: else logged)."""
    try:
        current = os.getpriority(os.PRIO_PROCESS, 0)
        wanted = min(max(current, low), high)
        if wanted != current:
            os.setpriority(os.PRIO_PROCESS, 0, wanted)
    except OSError as e:
        LOG.debug("priority left as it is: %s", e)
