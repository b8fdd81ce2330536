"""users_groups: create groups and users, set their passwords, sudo/doas rules and SSH keys.

Groups are created first, then users in order, then group members are added (so a group may list
users made by the same config). Each user is applied on its own: a bad value (unknown group with
``create_groups: false``, an invalid sudo rule, a malformed SSH key) is reported with its config
path, the rest of that user and every other user are still applied, and no file that failed its
check is installed. Passwords go to ``chpasswd`` on stdin and never appear in logs.
"""

from __future__ import annotations

import os
from typing import Any

from cloudseed.agent.distros import DistroError, file_header
from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._sudoers import (
    RuleError,
    check_together,
    doas_rules_from_config,
    render_block,
    rules_from_config,
    write_doas_rules,
    write_user_rules,
)
from cloudseed.agent.sshkeys import DISABLE_ROOT_OPTS, SshKeyError, install_authorized_keys, parse_key
from cloudseed.agent.users import (
    GroupRequest,
    UserRequest,
    UsersConfigError,
    check_name,
    normalize_groups,
    normalize_users,
    split_names,
)
from cloudseed.core.root import RootError
from cloudseed.core.values import as_bool

# present when the running kernel has SELinux enabled (what useradd -Z checks); a kernel fact, not the target's
SELINUXFS_ENFORCE = "/sys/fs/selinux/enforce"

_NAMES = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    {"type": "object", "additionalProperties": {"type": "null"}, "deprecated": True,
                     "deprecated_version": "23.1", "deprecated_description": "Use a string or a list of strings."}]}
# groups: {name: member or [members]}, or a list of names and such mappings
_GROUP_MAP = {"type": "object", "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "null"}, {
    "type": "array", "items": {"type": "string"}, "minItems": 1}]}}
_USER = {
    "type": "object",
    "oneOf": [{"required": ["name"]}, {"required": ["snapuser"]}],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"}, "gecos": {"type": "string"}, "groups": _NAMES,
        "primary_group": {"type": "string"},
        "sudo": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}},
                           {"type": "null"},
                           {"type": "boolean", "enum": [False], "deprecated": True, "deprecated_version": "22.2",
                            "deprecated_description": "Use null instead of false."}]},
        "doas": {"type": "array", "items": {"type": "string"}},
        "shell": {"type": "string"}, "lock_passwd": {"type": "boolean"},
        "passwd": {"type": "string"}, "hashed_passwd": {"type": "string"}, "plain_text_passwd": {"type": "string"},
        "ssh_authorized_keys": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "ssh_import_id": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "ssh_redirect_user": {"type": "boolean"},
        "uid": {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+$", "deprecated": True,
                                                  "deprecated_version": "22.3",
                                                  "deprecated_description": "Use an integer."}]},
        "system": {"type": "boolean"}, "homedir": {"type": "string"}, "no_create_home": {"type": "boolean"},
        "no_user_group": {"type": "boolean"}, "no_log_init": {"type": "boolean"},
        "expiredate": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}, "inactive": {"type": "string"},
        "create_groups": {"type": "boolean"}, "selinux_user": {"type": "string"}, "snapuser": {"type": "string"},
    },
}
# The hyphenated spellings of a user's keys: cloud-init and cloudseed (users._clean_keys) both
# apply them as the underscored key, so they are deprecated, never unknown; the release that
# deprecated each, as cloud-init 26.x's schema says.
_HYPHENATED_SINCE = {"lock_passwd": "22.3", "ssh_authorized_keys": "18.3"}
for _key in [k for k in _USER["properties"] if "_" in k]:
    _USER["properties"][_key.replace("_", "-")] = dict(
        _USER["properties"][_key], deprecated=True, deprecated_version=_HYPHENATED_SINCE.get(_key, "24.2"),
        deprecated_description=f"Use {_key}.")

MODULE = ModuleSpec(
    name="users_groups", stage=STAGE_INIT,
    title="Create users and groups",
    schema={"properties": {
        # ``users: []``: nobody, not even the default user (an error in 22.4, valid since 23.x)
        "users": {"oneOf": [{"type": "array", "items": {"oneOf": [{"type": "string"}, _USER,
                                                                  {"type": "array", "items": {"type": "string"}}]}},
                            {"type": "string", "deprecated": True, "deprecated_description": "Use a list."},
                            {"type": "object", "deprecated": True, "deprecated_description": "Use a list."}]},
        "user": {"oneOf": [{"type": "string"}, _USER], "deprecated": True,
                 "deprecated_description": "Use 'users' and system_info.default_user."},
        "groups": {"oneOf": [{"type": "string"}, _GROUP_MAP,
                             {"type": "array", "minItems": 1, "items": {"oneOf": [{"type": "string"}, _GROUP_MAP]}}]},
    }},
    examples=(
        """\
#cloud-config
groups:
  - developers
  - auditors: [root]
users:
  - default
  - name: alice
    gecos: Alice Example
    groups: [developers, sudo]
    sudo: "ALL=(ALL) NOPASSWD:ALL"
    shell: /bin/bash
    lock_passwd: true
    ssh_authorized_keys:
      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE8+SGUx2YvS64/fSXgfms5RWFi5eKtbWHB+x04sTANT alice@laptop
  - name: backup
    system: true
    no_create_home: true
    homedir: /var/backups
""",
        """\
#cloud-config
# No default user; one account with a hashed password and a fixed uid.
users:
  - name: deploy
    uid: 2001
    primary_group: deploy
    lock_passwd: false
    hashed_passwd: $6$Qz3KsV8pEw$MABSdmP10pwSOpex0.5OiwkEkUD2YvvhNl0pjFaR66hWp2qHTAaj0.vQrvkflrORMHS9zNk6fiP.oZizDhdcZ1
""",
    ),
)


class UserApplyError(Exception):
    """One part of one user could not be applied (message names the config path)."""


def _existing_groups(ctx: ModuleContext, names: list[str], where: str, create: bool,
                     problems: list[str]) -> list[str]:
    usable = []
    for name in names:
        try:
            check_name(name, where, "group")
        except UsersConfigError as e:
            problems.append(str(e))
            continue
        if ctx.distro.group_exists(name):
            usable.append(name)
        elif create:
            try:
                ctx.distro.create_group(name)
                ctx.log.info("created group %s", name)
                usable.append(name)
            except DistroError as e:
                problems.append(f"{where}: cannot create group {name!r}: {e}")
        else:
            problems.append(f"{where}: group {name!r} does not exist (and create_groups is false); "
                            "the user is created without it")
    return usable


def _spec_for_useradd(ctx: ModuleContext, request: UserRequest, problems: list[str]) -> dict[str, Any]:
    spec = request.spec
    where = request.where
    create = as_bool(spec.get("create_groups"), True)
    out: dict[str, Any] = {}
    for key in ("gecos", "homedir", "shell", "expiredate", "selinux_user"):
        if spec.get(key) not in (None, ""):
            if not isinstance(spec[key], (str, int)) or "\n" in str(spec[key]) or ":" in str(spec[key]):
                raise UserApplyError(f"{where}.{key}: expected a single-line value without ':'")
            out[key] = str(spec[key])
    if "selinux_user" in out and not os.path.exists(SELINUXFS_ENFORCE):
        # useradd refuses -Z on a kernel without SELinux, and the user would not be made at all
        # (cloud-init passes it anyway and loses the user; its own example has selinux_user)
        ctx.warn(f"{where}.selinux_user: SELinux is not enabled on this kernel; {request.name!r} is "
                 f"created without the SELinux user {out.pop('selinux_user')!r}")
    if spec.get("uid") not in (None, ""):
        if isinstance(spec["uid"], bool) or not str(spec["uid"]).isdigit():
            raise UserApplyError(f"{where}.uid: {spec['uid']!r} is not a number")
        out["uid"] = str(spec["uid"])
    if spec.get("inactive") not in (None, ""):
        if not str(spec["inactive"]).lstrip("-").isdigit():
            raise UserApplyError(f"{where}.inactive: {spec['inactive']!r} is not a number of days")
        out["inactive"] = str(spec["inactive"])
    for flag in ("system", "no_create_home", "no_user_group", "no_log_init"):
        out[flag] = as_bool(spec.get(flag), False)
    try:
        groups = split_names(spec.get("groups"), f"{where}.groups")
    except UsersConfigError as e:
        raise UserApplyError(str(e)) from None
    if spec.get("primary_group"):
        primary = str(spec["primary_group"])
        found = _existing_groups(ctx, [primary], f"{where}.primary_group", create, problems)
        if not found:
            raise UserApplyError(f"{where}.primary_group: group {primary!r} does not exist and could not be made")
        out["primary_group"] = primary
    out["groups"] = _existing_groups(ctx, groups, f"{where}.groups", create, problems)
    return out


def _apply_passwords(ctx: ModuleContext, request: UserRequest, problems: list[str]) -> None:
    spec, distro = request.spec, ctx.distro
    for key, hashed in (("passwd", True), ("plain_text_passwd", False), ("hashed_passwd", True)):
        value = spec.get(key)
        if not value:
            continue
        if not isinstance(value, str) or "\n" in value:
            problems.append(f"{request.where}.{key}: expected a single-line string")
            continue
        try:
            distro.chpasswd([(request.name, value)], hashed=hashed)
        except DistroError as e:
            problems.append(f"{request.where}.{key}: {e}")
    if as_bool(spec.get("lock_passwd"), True):
        try:
            distro.lock_password(request.name)
        except DistroError as e:
            problems.append(f"{request.where}.lock_passwd: {e}")


def _apply_keys(ctx: ModuleContext, request: UserRequest, problems: list[str]) -> None:
    spec = request.spec
    value = spec.get("ssh_authorized_keys")
    if value is None:
        return
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        problems.append(f"{request.where}.ssh_authorized_keys: expected a list of keys")
        return
    keys = []
    for index, item in enumerate(items):
        try:
            keys.append(parse_key("" if item is None else str(item)))  # a bare "-" is empty, not 'None'
        except SshKeyError as e:
            problems.append(f"{request.where}.ssh_authorized_keys[{index}]: not a valid SSH public key ({e})")
    if keys:
        try:
            install_authorized_keys(ctx.root, request.name, keys)
        except (SshKeyError, RootError, OSError) as e:
            problems.append(f"{request.where}.ssh_authorized_keys: {e}")


def _apply_redirect(ctx: ModuleContext, request: UserRequest, default_name: str | None,
                    problems: list[str]) -> None:
    if not as_bool(request.spec.get("ssh_redirect_user"), False):
        return
    if "ssh_authorized_keys" in request.spec or "ssh_import_id" in request.spec:
        problems.append(f"{request.where}.ssh_redirect_user: cannot be combined with ssh_authorized_keys "
                        "or ssh_import_id")
        return
    cloud_keys = list(getattr(ctx.datasource, "public_keys", None) or [])
    if not default_name or not cloud_keys:
        ctx.warn(f"{request.where}.ssh_redirect_user: no default user or no datasource keys; nothing to do")
        return
    options = DISABLE_ROOT_OPTS.replace("$USER", default_name).replace("$DISABLE_USER", request.name)
    keys = []
    for line in cloud_keys:
        try:
            keys.append(parse_key(line, options=options))
        except SshKeyError:
            continue
    if keys:
        install_authorized_keys(ctx.root, request.name, keys)


def apply_user(ctx: ModuleContext, request: UserRequest, default_name: str | None, problems: list[str],
               checked_sudo: frozenset[str] = frozenset()) -> None:
    """Create/update one user; problems that leave the rest of the user usable go to ``problems``.
    ``checked_sudo``: sudo blocks already found valid (``_sudoers.check_together``)."""
    distro = ctx.distro
    spec = request.spec
    where = request.where
    if spec.get("snapuser"):
        problems.append(f"{where}.snapuser: snap users are not supported; user skipped")
        return
    if as_bool(spec.get("no_create_home"), False) or as_bool(spec.get("system"), False):
        needs_home = [k for k in ("ssh_authorized_keys", "ssh_import_id", "ssh_redirect_user") if spec.get(k)]
        if needs_home:
            raise UserApplyError(f"{where}: {', '.join(needs_home)} need a home directory "
                                 "(remove no_create_home/system)")
    # check everything that could be rejected before touching the system
    sudo_rules: list[str] = []
    doas_rules: list[str] = []
    try:
        sudo_rules = rules_from_config(spec.get("sudo"), f"{where}.sudo")
    except RuleError as e:
        problems.append(f"{e}; no sudo rules installed for {request.name}")
    try:
        doas_rules = doas_rules_from_config(spec.get("doas"), request.name, f"{where}.doas")
    except RuleError as e:
        problems.append(f"{e}; no doas rules installed for {request.name}")
    if distro.user_exists(request.name) and _half_made(ctx, request.name):
        # an earlier run of this module was killed inside useradd (its home may be root's, its group
        # missing): made again from the start, as a clean boot would have made it
        ctx.log.warning("user %s was left half made by an interrupted run: made again", request.name)
        try:
            distro.remove_user(request.name)
        except DistroError as e:
            problems.append(f"{where}: user {request.name!r} was left half made and cannot be removed: {e}")
    if distro.user_exists(request.name):
        ctx.log.info("user %s already exists; account settings left as they are", request.name)
    else:
        useradd_spec = _spec_for_useradd(ctx, request, problems)
        ctx.record_done(f"useradd {request.name} started")
        try:
            distro.add_user(request.name, useradd_spec)
        except DistroError as e:
            undone = _undo_half_made(ctx, request.name)
            raise UserApplyError(f"{where}: cannot create user {request.name!r}: {e}{undone}") from None
        ctx.record_done(f"useradd {request.name} finished")
        ctx.log.info("created user %s", request.name)
    _apply_passwords(ctx, request, problems)
    if sudo_rules:
        try:
            write_user_rules(ctx.root, distro.sudoers_file, request.name, sudo_rules, file_header(),
                             f"{where}.sudo", checked=checked_sudo)
        except RuleError as e:
            problems.append(f"{e}; no sudo rules installed for {request.name}")
        except (RootError, OSError) as e:  # a read-only sudoers.d: the rules only, never the user's keys
            problems.append(f"{where}.sudo: {_write_failure(e)}; no sudo rules installed for {request.name}")
    if doas_rules:
        try:
            write_doas_rules(ctx.root, distro.doas_file, request.name, doas_rules, file_header(), f"{where}.doas")
        except RuleError as e:
            problems.append(f"{e}; no doas rules installed for {request.name}")
        except (RootError, OSError) as e:
            problems.append(f"{where}.doas: {_write_failure(e)}; no doas rules installed for {request.name}")
    _apply_keys(ctx, request, problems)
    _apply_redirect(ctx, request, default_name, problems)
    # a user's ssh_import_id list is imported by the ssh_import_id module (config stage), as in cloud-init


def _half_made(ctx: ModuleContext, name: str) -> bool:
    """Did an earlier run of this module (for this instance) start ``useradd name`` and never see it end?"""
    return ctx.done_before(f"useradd {name} started") and not ctx.done_before(f"useradd {name} finished")


def _undo_half_made(ctx: ModuleContext, name: str) -> str:
    """Remove the user a failed ``useradd`` left behind (a full disk: the account files written, its
    home cut short), at once: later modules of this boot then write nothing into a home that the next
    run, making the user again, would remove (a deferred file owned by the user is written once the
    user is whole). What the message adds about it; when even that fails, the next run makes it again."""
    if not ctx.distro.user_exists(name):
        return ""
    try:
        ctx.distro.remove_user(name)
    except DistroError as e:
        ctx.log.warning("user %s was left half made and cannot be removed now (%s): made again at the next run",
                        name, e)
        return "; it was left half made and is made again at the next run"
    return "; what it had made was removed"


def left_half_made(ctx: ModuleContext, name: str) -> bool:
    """Is ``name`` a user this module started making for this instance and never finished (a ``useradd``
    a full disk failed, and the removal after it too)? The next run removes it with its home and makes
    it again: until then another module writes nothing into it (``write_files_deferred``)."""
    from cloudseed.agent.state import Semaphores

    parts = Semaphores(ctx.paths, ctx.instance_id).parts(MODULE.name, MODULE.frequency)
    started, finished = f"useradd {name} started", f"useradd {name} finished"
    return parts.done(started) and not parts.done(finished) and ctx.distro.user_exists(name)


def _write_failure(e: Exception) -> str:
    """``e`` (a write that failed) as a short phrase naming the file."""
    if isinstance(e, OSError) and e.filename:
        return f"cannot write {e.filename}: {e.strerror}"
    return str(e)


def _add_members(ctx: ModuleContext, group: GroupRequest, problems: list[str]) -> None:
    present = set(ctx.distro.group_members(group.name))
    for member in group.members:
        if member in present:
            continue
        if not ctx.distro.user_exists(member):
            problems.append(f"{group.where}: member {member!r} is not a user; not added to {group.name}")
            continue
        try:
            ctx.distro.add_to_group(member, group.name)
        except DistroError as e:
            problems.append(f"{group.where}: {e}")


def _check_sudo_together(ctx: ModuleContext, users: list[UserRequest]) -> frozenset[str]:
    """Every user's sudo block checked in one visudo run (``_sudoers.check_together``); rules that
    cannot be read are left out here and reported by ``apply_user`` as before."""
    blocks = []
    for request in users:
        try:
            rules = rules_from_config(request.spec.get("sudo"), f"{request.where}.sudo")
        except RuleError:
            continue
        if rules and not request.spec.get("snapuser"):
            blocks.append(render_block(request.name, rules))
    try:
        return check_together(ctx.root, blocks)
    except (RootError, OSError):  # the check file cannot be written: each user's own check says so
        return frozenset()


def handle(ctx: ModuleContext) -> None:
    problems: list[str] = []
    try:
        groups = normalize_groups(ctx.cfg.get("groups"))
    except UsersConfigError as e:
        problems.append(str(e))
        groups = []
    try:
        users, warnings = normalize_users(ctx.cfg, ctx.distro.default_user())
    except UsersConfigError as e:
        problems.append(str(e))
        users, warnings = [], []
    for warning in warnings:
        ctx.warn(warning)
    for group in groups:
        if ctx.distro.group_exists(group.name):
            continue
        try:
            ctx.distro.create_group(group.name)
            ctx.log.info("created group %s", group.name)
        except DistroError as e:
            problems.append(f"{group.where}: {e}")
    default_name = next((u.name for u in users if u.is_default), None)
    checked_sudo = _check_sudo_together(ctx, users)
    for request in users:
        try:
            apply_user(ctx, request, default_name, problems, checked_sudo)
        except (UserApplyError, RuleError, UsersConfigError) as e:
            problems.append(str(e))
        except (RootError, OSError) as e:
            problems.append(f"{request.where}: {e}")
    for group in groups:
        if ctx.distro.group_exists(group.name):
            _add_members(ctx, group, problems)
    if problems:
        raise ModuleError("; ".join(problems))
