"""The EC2-only settings of an instance record (``InstanceRecord.ec2``) and their validation.

Every key is optional; what is not given is derived when the metadata is built
(``provider/instance_data/ec2.py``). Kept in the record's stored JSON body, so no SQL change.
"""

from __future__ import annotations

import re
from typing import Any

from cloudseed.provider.registry.errors import RecordError

LIFE_CYCLES = ("on-demand", "spot", "scheduled")
SPOT_ACTIONS = ("terminate", "stop", "hibernate")
EVENT_STATES = ("active", "completed", "canceled")
_ROLE_RE = re.compile(r"^[A-Za-z0-9+=,.@_-]{1,64}$")
_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
_ACCOUNT_RE = re.compile(r"^[0-9]{12}$")

# key -> (kind, description); kind is the validator below
FIELDS: dict[str, str] = {
    "iam_role": "IAM role name of the instance profile (iam/info, iam/security-credentials/ROLE)",
    "instance_metadata_tags": "'enabled' (default) or 'disabled': whether tags/instance is served",
    "hop_limit": "IMDSv2 token reply IP TTL for this instance, 1-64 (default: the server's token_hop_limit)",
    "life_cycle": "instance-life-cycle: on-demand (default), spot or scheduled",
    "instance_action": "instance-action (default 'none')",
    "spot": "{action: terminate|stop|hibernate, time: YYYY-MM-DDTHH:MM:SSZ}: spot/instance-action and "
            "spot/termination-time",
    "events": "[{code, description, state: active|completed|canceled, not_before, not_after, id}]: "
              "events/maintenance/scheduled (active) and history",
    "rebalance": "{notice_time: YYYY-MM-DDTHH:MM:SSZ}: events/recommendations/rebalance (a rebalance recommendation)",
    "target_lifecycle_state": "autoscaling/target-lifecycle-state: InService, Terminated, Detached, Standby, "
                              "Warmed:Hibernated, Warmed:Running, Warmed:Stopped or Warmed:Terminated",
    "vpc_id": "vpc-id (default derived from the first network)",
    "vpc_cidr": "vpc-ipv4-cidr-block (default: the /16 holding the first subnet)",
    "subnet_ids": "{network: subnet-id} (default derived from the network name)",
    "security_groups": "security group names (default ['default'])",
    "security_group_ids": "security group ids (default derived from the names)",
    "availability_zone_id": "placement/availability-zone-id",
    "placement_group": "placement/group-name",
    "partition_number": "placement/partition-number",
    "host_id": "placement/host-id",
    "product_codes": "product-codes",
    "account_id": "owner-id and accountId, 12 digits (default: project_id when it is 12 digits or fewer, "
                  "zero-padded; else 12 digits derived from it; else 123456789012)",
}


def validate_ec2(value: Any) -> dict:
    """``value`` checked and normalised; raises ``RecordError`` (``ec2.KEY``) for the first bad key."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordError("ec2", "must be an object of EC2 settings")
    clean: dict[str, Any] = {}
    for key, item in value.items():
        where = f"ec2.{key}"
        if key not in FIELDS:
            raise RecordError(where, f"unknown field (known: {', '.join(sorted(FIELDS))})")
        if item is None:
            continue
        if key == "iam_role":
            _match(where, item, _ROLE_RE, "an IAM role name (1-64 of letters, digits, +=,.@_-)")
        elif key == "instance_metadata_tags":
            _choice(where, item, ("enabled", "disabled"))
        elif key == "hop_limit":
            _int(where, item, 1, 64)
        elif key == "life_cycle":
            _choice(where, item, LIFE_CYCLES)
        elif key == "spot":
            if not isinstance(item, dict) or set(item) - {"action", "time"}:
                raise RecordError(where, "must be {action, time}")
            _choice(f"{where}.action", item.get("action"), SPOT_ACTIONS)
            _match(f"{where}.time", item.get("time"), _TIME_RE, "a UTC time like 2026-11-24T21:00:00Z")
        elif key == "rebalance":
            if not isinstance(item, dict) or set(item) != {"notice_time"}:
                raise RecordError(where, "must be {notice_time: YYYY-MM-DDTHH:MM:SSZ}")
            _match(f"{where}.notice_time", item["notice_time"], _TIME_RE, "a UTC time like 2026-11-24T21:00:00Z")
        elif key == "target_lifecycle_state":
            from cloudseed.provider.registry.events import LIFECYCLE_STATES

            _choice(where, item, LIFECYCLE_STATES)
        elif key == "account_id":
            _match(where, item, _ACCOUNT_RE, "an AWS account id: 12 digits")
        elif key == "events":
            item = [_event(f"{where}[{i}]", e, i) for i, e in enumerate(_list(where, item))]
        elif key in ("security_groups", "security_group_ids", "product_codes"):
            for i, name in enumerate(_list(where, item)):
                _match(f"{where}[{i}]", name, _ID_RE, "1-128 letters, digits, '.', '_', ':' or '-'")
        elif key == "subnet_ids":
            if not isinstance(item, dict):
                raise RecordError(where, "must be an object of network name to subnet id")
            for network, subnet in item.items():
                _match(f"{where}.{network}", subnet, _ID_RE, "a subnet id")
        elif key == "partition_number":
            _int(where, item, 1, 7)
        elif key == "vpc_cidr":
            import ipaddress

            try:
                ipaddress.ip_network(str(item))
            except ValueError:
                raise RecordError(where, f"{item!r} is not a network like 10.0.0.0/16")
        else:
            _match(where, item, _ID_RE, "1-128 letters, digits, '.', '_', ':' or '-'")
        clean[key] = item
    return clean


def _event(where: str, event: Any, index: int) -> dict:
    if not isinstance(event, dict):
        raise RecordError(where, "must be an object")
    known = ("code", "description", "state", "not_before", "not_after", "id")
    for key in event:
        if key not in known:
            raise RecordError(f"{where}.{key}", f"unknown field (known: {', '.join(known)})")
    code = event.get("code", "system-reboot")
    _choice(f"{where}.code", code, ("instance-reboot", "system-reboot", "system-maintenance", "instance-retirement",
                                   "instance-stop"))
    state = event.get("state", "active")
    _choice(f"{where}.state", state, EVENT_STATES)
    for key in ("not_before", "not_after"):
        if event.get(key) is not None:
            _match(f"{where}.{key}", event[key], _TIME_RE, "a UTC time like 2026-11-24T21:00:00Z")
    description = event.get("description", "scheduled maintenance")
    if not isinstance(description, str) or len(description) > 255:
        raise RecordError(f"{where}.description", "must be a string of at most 255 characters")
    event_id = event.get("id") or f"instance-event-{index:017x}"
    _match(f"{where}.id", event_id, _ID_RE, "an event id")
    return {"code": code, "description": description, "state": state, "not_before": event.get("not_before"),
            "not_after": event.get("not_after"), "id": event_id}


def _list(where: str, value: Any) -> list:
    if not isinstance(value, list):
        raise RecordError(where, "must be a list")
    return value


def _choice(where: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise RecordError(where, f"{value!r} must be one of {', '.join(choices)}")


def _int(where: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RecordError(where, f"{value!r} must be an integer {low}-{high}")


def _match(where: str, value: Any, pattern: re.Pattern, what: str) -> None:
    if not isinstance(value, str) or not pattern.match(value):
        raise RecordError(where, f"{value!r} is not {what}")
