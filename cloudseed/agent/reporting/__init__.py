"""Event reporting (cloud-init's ``reporting:``): each stage and module's start and finish, sent away.

``reporting`` maps names to handlers, as cloud-init's does; a false value removes a handler an
earlier config part set::

    reporting:
      hook: {type: webhook, endpoint: "https://ci.example/boot", retries: 2, timeout: 3,
             headers: {Authorization: "Bearer ..."}}          # headers: cloudseed's addition
      kvp: {type: hyperv}                                      # Azure: the KVP pool file
      platform: {type: cloudseed}                              # the cloudseed metadata server
      local: {type: log, level: INFO}

Handler types are files here named after them (``log``, ``print``, ``webhook``, ``hyperv``,
``cloudseed``), each with ``make(options, context)`` returning an object with ``publish(event)``
and ``flush(deadline)``. Events are cloud-init's: ``start`` and ``finish`` of the stages
(``init-local``, ``init-network``, ``modules-config``, ``modules-final``) and of each module that
ran or was skipped for a reason (``modules-final/config-scripts_user``), a finish with
``result`` SUCCESS, WARN or FAIL and ``duration``; cloudseed adds ``boot_id`` and, on a stage's
finish, ``datasource``. Modules skipped because nothing configures them send nothing (cloud-init
sends a pair for each; cloudseed keeps the timeline to what happened).

Nothing here is imported on a boot whose config has no ``reporting`` (``BootState.update_reporting``
looks first). Every secret value of the config and the datasource's sensitive metadata
(passwords, keys, tokens: ``_secrets.py``) is replaced in every event before any handler sees
it. Handlers that send over the network queue the events for a background thread
(``_sender.py``): the boot never waits for a slow endpoint, and at the process's exit the queue
gets at most ``FLUSH_SECONDS`` in all to drain.
"""

from __future__ import annotations

import importlib
import logging
import time

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.reporting")

STAGE_EVENTS = {"local": "init-local", "network": "init-network", "config": "modules-config",
                "final": "modules-final"}
MODULE_PARENTS = {"init": "init-network", "config": "modules-config", "final": "modules-final",
                  "single": "single"}
RESULTS = ("SUCCESS", "WARN", "FAIL")
FLUSH_SECONDS = 2.0
ORIGIN = "cloudinit"  # what cloud-init's events say; consumers filter on it


class ReportingError(ValueError):
    """A ``reporting`` setting that cannot be used; the message names the key."""


class Event:
    """One start or finish event (cloud-init's fields, plus cloudseed's extras)."""

    __slots__ = ("event_type", "name", "description", "timestamp", "result", "duration", "extra")

    def __init__(self, event_type: str, name: str, description: str, timestamp: float | None = None,
                 result: str | None = None, duration: float | None = None, extra: dict | None = None):
        self.event_type = event_type
        self.name = name
        self.description = description
        self.timestamp = time.time() if timestamp is None else timestamp
        self.result = result
        self.duration = duration
        self.extra = extra or {}

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "event_type": self.event_type,
                               "origin": ORIGIN, "timestamp": self.timestamp}
        if self.event_type == "finish":
            out["result"] = self.result or "SUCCESS"
            out["duration"] = round(self.duration or 0.0, 4)
        out.update(self.extra)
        return out

    def as_string(self) -> str:
        if self.event_type == "finish":
            return (f"finish: {self.name}: {self.result}: {self.description} "
                    f"(duration: {self.duration or 0.0:.3f}s)")
        return f"start: {self.name}: {self.description}"


class Reporter:
    """The handlers of one agent process, and the secrets kept out of what they send."""

    def __init__(self, root: Any, boot_id: str = "", sent_file: str = ""):
        from cloudseed.agent.reporting._secrets import Secrets

        self.root = root
        # this boot's stages whose finish was sent (by this process or an earlier stage's): a
        # reporter made later replays only the others, so nothing is sent twice
        self.sent_file = sent_file
        self.handlers: dict[str, Any] = {}
        self.secrets = Secrets()
        self.boot_id = boot_id or _boot_id(root)
        self.problems: list[str] = []  # settings that could not be used (said in the status)
        self._told = 0  # how many of them the status has been given
        self.settings: dict[str, Any] = {}  # name -> the settings its handler was made from
        self.started: dict[str, float] = {}  # event name -> monotonic start, for durations
        self.finished: set[str] = set()  # stages whose finish this process published
        self._closed = False
        import atexit

        atexit.register(self.close)

    # -- configuration ---------------------------------------------------------------------
    def configure(self, settings: Any, cfg: dict | None = None) -> None:
        """Apply a ``reporting`` mapping (names -> handler settings; a false value removes one)."""
        if cfg is not None:
            self.secrets.add_config(cfg)
        if not isinstance(settings, dict):
            if settings not in (None, {}):
                self._problem(f"reporting: must be a mapping of names to handlers, got {type(settings).__name__}")
            return
        for name, options in settings.items():
            if self.settings.get(str(name)) == options:
                continue  # the same settings again (each stage reads the config): the same handler
            self.settings[str(name)] = options
            if not options:
                gone = self.handlers.pop(str(name), None)
                if gone is not None:
                    gone.flush(time.monotonic() + 0.5)
                continue
            try:
                handler = self._make(str(name), options)
            except ReportingError as e:
                self._problem(str(e))
                continue
            old = self.handlers.pop(str(name), None)
            if old is not None:
                old.flush(time.monotonic() + 0.5)
            self.handlers[str(name)] = handler

    def _make(self, name: str, options: Any) -> Any:
        if not isinstance(options, dict):
            raise ReportingError(f"reporting.{name}: must be a mapping with a type, got {type(options).__name__}")
        kind = options.get("type")
        known = handler_types()
        if kind not in known:
            raise ReportingError(f"reporting.{name}.type: {kind!r} is not a handler type "
                                 f"(known: {', '.join(known)})")
        module = importlib.import_module(f"{__name__}.{kind}")
        rest = {k: v for k, v in options.items() if k != "type"}
        return module.make(rest, HandlerContext(self.root, name, self))

    def add_instance_data(self, data: dict) -> None:
        """Keep the values instance data marks sensitive (``sensitive_keys``) out of events."""
        for key_path in data.get("sensitive_keys") or []:
            if key_path in ("merged_cfg", "ds/user_data", "ds/vendor_data"):
                continue  # blobs: their secrets are found by key (add_config); the rest of them is not secret
            node: Any = data
            for part in str(key_path).split("/"):
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                self.secrets.add_values(node)

    def take_problems(self) -> list[str]:
        """The problems not yet given to the status (each is given once)."""
        new, self._told = self.problems[self._told:], len(self.problems)
        return new

    def problem(self, message: str) -> None:
        """A setting a handler cannot use (said in the status once, at the stage's end)."""
        self._problem(message)

    def _problem(self, message: str) -> None:
        LOG.warning("%s", message)
        if message not in self.problems:
            self.problems.append(message)

    # -- events ----------------------------------------------------------------------------
    def publish(self, event: Event) -> None:
        if not self.handlers:
            return
        event.description = self.secrets.redact(event.description)
        event.name = self.secrets.redact(event.name)
        if self.boot_id:
            event.extra.setdefault("boot_id", self.boot_id)
        for name, handler in list(self.handlers.items()):
            try:
                handler.publish(event)
            except Exception as e:  # a handler's failure never reaches the boot
                LOG.warning("reporting handler %s: %s: %s", name, type(e).__name__, e)

    def start(self, name: str, description: str, timestamp: float | None = None) -> None:
        self.started[name] = time.monotonic()
        self.publish(Event("start", name, description, timestamp))

    def finish(self, name: str, description: str, result: str = "SUCCESS", duration: float | None = None,
               timestamp: float | None = None, **extra: Any) -> None:
        began = self.started.pop(name, None)
        if duration is None:
            duration = time.monotonic() - began if began is not None else 0.0
        self.publish(Event("finish", name, description, timestamp, result, duration,
                           {k: v for k, v in extra.items() if v}))

    def stage_start(self, stage: str, timestamp: float | None = None) -> None:
        self.start(STAGE_EVENTS[stage], f"running stage {STAGE_EVENTS[stage]}", timestamp)

    def stage_finish(self, stage: str, errors: list[str], warnings: list[str], datasource: str | None,
                     timestamp: float | None = None, duration: float | None = None) -> None:
        result = "FAIL" if errors else "WARN" if warnings else "SUCCESS"
        if errors:
            description = f"{len(errors)} error(s): " + "; ".join(errors[:5])
        elif warnings:
            description = f"{len(warnings)} warning(s): " + "; ".join(warnings[:5])
        else:
            description = f"{STAGE_EVENTS[stage]} finished"
        self.finish(STAGE_EVENTS[stage], description, result, duration, timestamp, datasource=datasource or "")
        self.finished.add(stage)
        self._note_sent()

    def _note_sent(self) -> None:
        """The stages finished here are sent, once no handler still holds events (a handler that
        waits for the datasource to say where to send): a reporter made by a later process replays
        the others (a separate local stage's process ending before the datasource is known)."""
        if not self.sent_file or not self.handlers or not self.finished:
            return
        if any(getattr(h, "holding", False) for h in self.handlers.values()):
            return
        sent = self._sent()
        if not self.finished <= sent:
            self.root.write(self.sent_file, "".join(f"{s}\n" for s in sorted(sent | self.finished)), mode=0o644)

    def locate(self, datasource: Any, stage: str | None) -> None:
        """Where the boot is (the datasource found so far, the stage running): handlers that send
        to the platform learn from it where the platform is (``locate``)."""
        for name, handler in list(self.handlers.items()):
            if hasattr(handler, "locate"):
                try:
                    handler.locate(datasource, stage)
                except Exception as e:  # a handler's failure never reaches the boot
                    LOG.warning("reporting handler %s: %s: %s", name, type(e).__name__, e)
        self._note_sent()

    def _sent(self) -> set[str]:
        if not self.sent_file or not self.root.exists(self.sent_file):
            return set()
        return set(self.root.read_text(self.sent_file).split())

    def module_start(self, stage: str, module: str, frequency: str) -> None:
        name = f"{MODULE_PARENTS.get(stage, stage)}/config-{module}"
        self.start(name, f"running config-{module} with frequency {frequency}")

    def module_finish(self, stage: str, result: Any, warned: list[str]) -> None:
        """After ``run_module``: its ``ModuleResult`` and the warnings it added."""
        name = f"{MODULE_PARENTS.get(stage, stage)}/config-{result.name}"
        if name not in self.started:
            self.start(name, f"config-{result.name}: {result.reason or result.status}")
        if result.status == "failed":
            self.finish(name, f"running config-{result.name} failed: {result.reason}", "FAIL", result.seconds)
        elif warned:
            self.finish(name, "; ".join(warned[:5]), "WARN", result.seconds)
        elif result.status == "skipped":
            self.finish(name, f"config-{result.name} skipped: {result.reason}", "SUCCESS", result.seconds)
        else:
            self.finish(name, f"config-{result.name} ran successfully and took {result.seconds:.3f} seconds",
                        "SUCCESS", result.seconds)

    def replay(self, status_v1: dict, current: str) -> None:
        """The events of this boot's stages before reporting was configured (from ``status.json``)."""
        from cloudseed.agent.state.status import STAGE_KEYS, STAGE_ORDER

        sent = self._sent()
        for stage in STAGE_ORDER:
            record = status_v1.get(STAGE_KEYS[stage]) or {}
            start, end = record.get("start"), record.get("finished")
            if not start or (stage in sent and stage != current):
                continue
            self.publish(Event("start", STAGE_EVENTS[stage], f"running stage {STAGE_EVENTS[stage]}", start))
            if stage == current:
                self.started[STAGE_EVENTS[stage]] = time.monotonic() - max(0.0, time.time() - start)
                return
            if end:
                self.stage_finish(stage, record.get("errors") or [], record.get("warnings") or [],
                                  status_v1.get("datasource"), end, end - start)

    # -- ending ----------------------------------------------------------------------------
    def flush(self, seconds: float = FLUSH_SECONDS) -> None:
        """Give the handlers' queues up to ``seconds`` in all to drain."""
        deadline = time.monotonic() + seconds
        for name, handler in list(self.handlers.items()):
            try:
                handler.flush(deadline)
            except Exception as e:
                LOG.warning("reporting handler %s: flushing: %s", name, e)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.flush()


class HandlerContext:
    """What a handler may use: the root, its own name, the reporter's boot id."""

    def __init__(self, root: Any, name: str, reporter: Reporter):
        self.root = root
        self.name = name
        self.reporter = reporter


def handler_types() -> list[str]:
    """The handler types this package provides (its public files)."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def _boot_id(root: Any) -> str:
    """This boot's id (the kernel's), or "" when the root is not the running system."""
    if not getattr(root, "is_live", False):
        return ""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""
