"""``cloudseed instances events``: an instance's timeline (``provider/registry/events.py``).

``events list ID`` (``--json``), ``events add ID --kind KIND [--at TIME] [--until TIME | --for
SECONDS] [--detail KEY=VALUE]... [--id EVENT_ID]``, ``events set ID EVENT_ID [--state S] [--at]
[--until | --for] [--detail KEY=VALUE]...``, ``events cancel ID EVENT_ID`` and ``events rm ID
EVENT_ID``. TIME is ``2026-11-24T21:00:00Z``, ``+SECONDS`` from now, or epoch seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def configure(sub: Any) -> None:
    events = sub.add_parser("events", help="schedule events for an instance: spot interruptions, maintenance, "
                                           "lifecycle changes, faults (see docs/metadata-server.md)")
    actions = events.add_subparsers(dest="event_action", metavar="ACTION", required=True)
    lister = actions.add_parser("list", help="the instance's events, with their phase now")
    lister.add_argument("instance_id")
    lister.add_argument("--json", action="store_true", help="print JSON")
    add = actions.add_parser("add", help="schedule an event")
    add.add_argument("instance_id")
    add.add_argument("--kind", required=True, help="preempt, rebalance, maintenance, reboot, redeploy, freeze, "
                                                   "terminate, lifecycle or fault")
    add.add_argument("--id", dest="event_id", help="event id (default: a new UUID)")
    _timing(add)
    change = actions.add_parser("set", help="change an event's state, times or details")
    change.add_argument("instance_id")
    change.add_argument("event_id")
    change.add_argument("--state", choices=("scheduled", "canceled", "completed"))
    _timing(change)
    for name, text in (("cancel", "cancel an event (it moves to history)"), ("rm", "remove an event")):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("instance_id")
        parser.add_argument("event_id")


def _timing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--at", metavar="TIME", help="when it starts: 2026-11-24T21:00:00Z, +SECONDS or epoch "
                                                     "seconds (add: default now)")
    until = parser.add_mutually_exclusive_group()
    until.add_argument("--until", metavar="TIME", help="when it ends")
    until.add_argument("--for", dest="duration", type=float, metavar="SECONDS", help="how long it lasts")
    parser.add_argument("--detail", action="append", metavar="KEY=VALUE",
                        help="a detail of the kind (repeatable): preempt action=stop, notice_seconds=120; "
                             "maintenance code=instance-stop; lifecycle state=Terminated; "
                             "fault path_prefix=/latest/, status=503, delay_seconds=5 ...")


def run(registry: Any, args: argparse.Namespace, input_error: type) -> int:
    from cloudseed.provider.registry.events import DETAILS, EventError, parse_time

    action = args.event_action
    try:
        if action == "list":
            events = registry.events(args.instance_id)
            if registry.get(args.instance_id) is None:
                raise input_error(f"no instance {args.instance_id!r}")
            _print(events, args.json)
            return 0
        if action in ("cancel", "rm"):
            if action == "cancel":
                registry.update_event(args.instance_id, args.event_id, state="canceled")
            elif not registry.delete_event(args.instance_id, args.event_id):
                raise input_error(f"instance {args.instance_id} has no event {args.event_id}")
            return 0
        now = time.time()
        kind = args.kind if action == "add" else registry.get_event(args.instance_id, args.event_id)
        if kind is None:
            raise input_error(f"instance {args.instance_id} has no event {args.event_id}")
        kind = kind if isinstance(kind, str) else kind.kind
        details = _details(args.detail or [], DETAILS.get(kind, {}), input_error)
        if action == "add":
            start = parse_time(args.at, "--at", now) if args.at else now
            end = _end(args, start, now, parse_time)
            event = registry.add_event(args.instance_id, kind, start, end, details, args.event_id)
            print(event.event_id)
            return 0
        current = registry.get_event(args.instance_id, args.event_id)
        changes: dict[str, Any] = {}
        if args.state:
            changes["state"] = args.state
        if args.at:
            changes["not_before"] = parse_time(args.at, "--at", now)
        if args.until or args.duration is not None:
            changes["not_after"] = _end(args, changes.get("not_before", current.not_before), now, parse_time)
        if details:
            changes["details"] = {**current.details, **details}
        if not changes:
            raise input_error("nothing to change: give --state, --at, --until/--for or --detail")
        registry.update_event(args.instance_id, args.event_id, **changes)
        return 0
    except EventError as error:
        raise input_error(f"invalid {error.field}: {error.message}") from None


def _end(args: argparse.Namespace, start: float, now: float, parse_time: Any) -> Any:
    if args.duration is not None:
        if args.duration <= 0:
            from cloudseed.provider.registry.events import EventError

            raise EventError("--for", "must be a positive number of seconds")
        return start + args.duration
    return parse_time(args.until, "--until", now) if args.until else None


def _details(items: list[str], spec: dict, input_error: type) -> dict:
    """``KEY=VALUE`` flags typed as the kind declares them (numbers for numeric details)."""
    details: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise input_error(f"--detail {item!r}: expected KEY=VALUE")
        kind_type = spec.get(key, (str, None))[0]
        if kind_type in (int, float):
            try:
                details[key] = kind_type(value)
            except ValueError:
                raise input_error(f"--detail {item!r}: {key} must be a number") from None
        else:
            details[key] = value
    return details


def _print(events: list, as_json: bool) -> None:
    now = time.time()
    if as_json:
        print(json.dumps([{**e.to_dict(), "phase": e.phase(now)} for e in events], indent=1))
        return
    print(f"{'EVENT':<38} {'KIND':<12} {'STARTS':<21} {'ENDS':<21} {'STATE':<10} PHASE")
    for e in events:
        ends = e.to_dict()["not_after_utc"] or "-"
        print(f"{e.event_id:<38} {e.kind:<12} {e.to_dict()['not_before_utc']:<21} {ends:<21} {e.state:<10} "
              f"{e.phase(now)}")
