"""Users and groups from cloud-config: every accepted spelling normalised into one ordered form.

``users`` is a list (names, comma strings, mappings, the word ``default``), or the deprecated
mapping/string forms; ``default`` means the distro's default user (``system_info.default_user``)
merged with whatever the entry adds. ``user`` (singular, deprecated) renames/extends the default
user. ``groups`` is a name, a comma string, a list of names and ``{group: [members]}`` mappings,
or one mapping. Each request keeps the config path it came from, for error messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")

# keys a user entry may have (after '-' -> '_')
USER_KEYS = {
    "name", "gecos", "groups", "primary_group", "sudo", "doas", "shell", "lock_passwd", "passwd", "hashed_passwd",
    "plain_text_passwd", "ssh_authorized_keys", "ssh_import_id", "ssh_redirect_user", "uid", "system", "homedir",
    "no_create_home", "no_user_group", "no_log_init", "expiredate", "inactive", "create_groups", "selinux_user",
    "snapuser", "default",
}


class UsersConfigError(ValueError):
    """The users/groups configuration cannot be read; the message names the key."""


@dataclass
class UserRequest:
    name: str
    where: str  # config path: "users[1]" / "users[0] (default user)"
    spec: dict[str, Any] = field(default_factory=dict)
    is_default: bool = False


@dataclass
class GroupRequest:
    name: str
    where: str
    members: list[str] = field(default_factory=list)


def check_name(name: Any, where: str, what: str = "user") -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise UsersConfigError(f"{where}: {name!r} is not a valid {what} name "
                               "(letters, digits, '_', '-', '.', starting with a letter or '_', at most 32)")
    return name


def split_names(value: Any, where: str) -> list[str]:
    """A comma string or a list of names as a list of stripped names."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, dict):  # deprecated {group: ...} form: the keys are the names
        return [str(k).strip() for k in value]
    if isinstance(value, (list, tuple)):
        names = []
        for index, item in enumerate(value):
            if not isinstance(item, (str, int)) or isinstance(item, bool):
                raise UsersConfigError(f"{where}[{index}]: expected a name, got {type(item).__name__}")
            names += [part.strip() for part in str(item).split(",") if part.strip()]
        return names
    raise UsersConfigError(f"{where}: expected a name, a comma-separated string or a list")


def normalize_groups(value: Any) -> list[GroupRequest]:
    """``groups:`` in any accepted form, merged per group name, in order of appearance."""
    if value is None:
        return []
    items: list[tuple[Any, str]]
    if isinstance(value, str):
        items = [(name, "groups") for name in split_names(value, "groups")]
    elif isinstance(value, dict):
        items = [({k: v}, f"groups.{k}") for k, v in value.items()]
    elif isinstance(value, list):
        items = [(item, f"groups[{i}]") for i, item in enumerate(value)]
    else:
        raise UsersConfigError(f"groups: expected a list, a mapping or a comma-separated string, "
                               f"got {type(value).__name__}")
    merged: dict[str, GroupRequest] = {}
    for item, where in items:
        if isinstance(item, str):
            for name in split_names(item, where):
                merged.setdefault(name, GroupRequest(check_name(name, where, "group"), where))
        elif isinstance(item, dict):
            for name, members in item.items():
                where_group = where if where.endswith(f".{name}") else f"{where}.{name}"
                request = merged.setdefault(str(name), GroupRequest(check_name(str(name), where_group, "group"),
                                                                    where_group))
                if members is None:
                    continue
                if not isinstance(members, (str, list)):
                    raise UsersConfigError(f"{where_group}: members must be a name or a list of names")
                for member in split_names(members, where_group):
                    if member not in request.members:
                        request.members.append(member)
        else:
            raise UsersConfigError(f"{where}: expected a group name or {{group: [members]}}, "
                                   f"got {type(item).__name__}")
    return list(merged.values())


def _clean_keys(entry: dict, where: str) -> dict[str, Any]:
    cleaned = {}
    for key, value in entry.items():
        name = str(key).replace("-", "_").strip()
        if name:
            cleaned[name] = value
    return cleaned


def _merge_groups(*values: Any) -> list[str]:
    out: list[str] = []
    for value in values:
        for name in split_names(value, "groups") if value else []:
            if name not in out:
                out.append(name)
    return out


def normalize_users(cfg: dict, default_user: dict[str, Any] | None) -> tuple[list[UserRequest], list[str]]:
    """(the users to apply, warnings) from ``users``/``user``; UsersConfigError for unusable input."""
    warnings: list[str] = []
    raw = cfg.get("users", [])
    old_user = cfg.get("user")
    default = dict(default_user or {})
    if old_user:
        if isinstance(old_user, str):
            default["name"] = old_user
            warnings.append("user: a string is deprecated; use 'users: [default]' with system_info.default_user")
        elif isinstance(old_user, dict):
            default.update(_clean_keys(old_user, "user"))
        else:
            raise UsersConfigError(f"user: expected a name or a mapping, got {type(old_user).__name__}")

    entries: list[tuple[Any, str]] = []
    if raw is None:
        raw = []
    if isinstance(raw, str):
        warnings.append("users: a comma-separated string is deprecated; use a list")
        entries = [(name, "users") for name in split_names(raw, "users")]
    elif isinstance(raw, dict):
        warnings.append("users: a mapping is deprecated; use a list")
        for key, value in raw.items():
            if isinstance(value, dict):
                entries.append((dict(value, name=key), f"users.{key}"))
            elif value is True or (isinstance(value, str) and value.lower() in ("true", "yes")):
                entries.append((str(key), f"users.{key}"))
            elif value in (False, None) or isinstance(value, (str, int, float)):
                continue
            else:
                raise UsersConfigError(f"users.{key}: expected a mapping of user settings")
    elif isinstance(raw, list):
        entries = [(item, f"users[{i}]") for i, item in enumerate(raw)]
    else:
        raise UsersConfigError(f"users: expected a list, got {type(raw).__name__}")
    if old_user and not any(item == "default" or (isinstance(item, dict) and item.get("name", "default") == "default")
                            for item, _ in entries):
        entries.append(("default", "user"))

    ordered: dict[str, UserRequest] = {}
    for item, where in entries:
        if isinstance(item, str) or (isinstance(item, list) and all(isinstance(x, str) for x in item)):
            for name in split_names(item, where):
                if name not in ordered:
                    ordered[name] = UserRequest(name, where)
            continue
        if not isinstance(item, dict):
            raise UsersConfigError(f"{where}: expected a user name or a mapping of user settings, "
                                   f"got {type(item).__name__}")
        spec = _clean_keys(item, where)
        name = spec.pop("name", "default")
        if not isinstance(name, str):
            raise UsersConfigError(f"{where}.name: expected a string")
        unknown = sorted(set(spec) - USER_KEYS)
        if unknown:
            warnings.append(f"{where}: unknown user setting(s) {', '.join(unknown)} ignored")
        previous = ordered.get(name)
        if previous is not None:
            previous.spec.update(spec)
        else:
            ordered[name] = UserRequest(name, where, spec)

    users: list[UserRequest] = []
    if "default" in ordered:
        request = ordered.pop("default")
        if default.get("name"):
            base = dict(default)
            name = str(base.pop("name"))
            explicit = ordered.pop(name, None)
            explicit_spec = explicit.spec if explicit else {}
            spec = {**base, **request.spec, **explicit_spec}
            spec["groups"] = _merge_groups(explicit_spec.get("groups"), request.spec.get("groups"),
                                           base.get("groups"))
            users.append(UserRequest(name, f"{request.where} (default user {name})", spec, is_default=True))
        else:
            warnings.append(f"{request.where}: 'default' given but the system has no default user")
    users += list(ordered.values())
    for request in users:
        request.spec.pop("default", None)
        check_name(request.name, request.where)
    return users, warnings


def default_user_name(cfg: dict, default_user: dict[str, Any] | None) -> str | None:
    """The default user's name when ``users`` includes it (None otherwise or on bad input)."""
    try:
        users, _ = normalize_users(cfg, default_user)
    except UsersConfigError:
        return None
    return next((u.name for u in users if u.is_default), None)
