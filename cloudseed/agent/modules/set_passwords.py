"""set_passwords: ``chpasswd`` user passwords, the default user's ``password``, ``ssh_pwauth``.

``chpasswd.users`` entries are ``{name, password, type: text|hash|RANDOM}``; the deprecated
``chpasswd.list`` (a list or a multi-line string of ``user:password``, with ``R``/``RANDOM`` for
a generated password) is still read. ``expire`` (default true) makes users change the password
at first login. Generated passwords are printed on the console only: never in the log file,
never in instance data. Passwords reach ``chpasswd`` on stdin.

``admin_password: {post_to_metadata: true}`` is cloudbase-init's and Nova's admin password: a
generated password for the default user, posted once to the OpenStack metadata service encrypted
with the instance's first RSA SSH key, never shown anywhere (``cloudseed/agent/modules/_admin_password.py``).
"""

from __future__ import annotations

import re
import string

from cloudseed.agent.distros import DistroError
from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._admin_password import SCHEMA as ADMIN_PASSWORD_SCHEMA
from cloudseed.agent.users import default_user_name
from cloudseed.core.values import as_bool

_HASH = re.compile(r"^\$(1|2a|2b|2y|5|6|7|y|gy|sha1|md5)\$[^:\n]+$")
_RANDOM_ALPHABET = "".join(c for c in string.ascii_letters + string.digits if c not in "lIO01")

MODULE = ModuleSpec(
    name="set_passwords", stage=STAGE_CONFIG,
    title="Set user passwords and SSH password authentication",
    schema={"properties": {
        "chpasswd": {"type": "object", "properties": {
            "expire": {"type": "boolean"},
            "users": {"type": "array", "items": {
                "type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}, "password": {"type": "string"},
                               "type": {"type": "string", "enum": ["text", "hash", "RANDOM"]}},
                "additionalProperties": False}},
            "list": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                     "deprecated": True, "deprecated_version": "22.2", "deprecated_description": "Use chpasswd.users."},
        }, "additionalProperties": False},
        "password": {"type": "string"},
        "ssh_pwauth": {"oneOf": [{"type": "boolean"}, {"type": "string"}]},
        "admin_password": ADMIN_PASSWORD_SCHEMA,
    }},
    examples=(
        """\
#cloud-config
# Set passwords: a crypt(3) hash, and a random one (printed on the console).
ssh_pwauth: false
chpasswd:
  expire: false
  users:
    - name: root
      password: $6$Qz3KsV8pEw$MABSdmP10pwSOpex0.5OiwkEkUD2YvvhNl0pjFaR66hWp2qHTAaj0.vQrvkflrORMHS9zNk6fiP.oZizDhdcZ1
      type: hash
    - name: operator
      type: RANDOM
""",
        """\
#cloud-config
# The default user's password; it must be changed at the first login.
password: change-me-at-first-login
chpasswd:
  expire: true
ssh_pwauth: true
""",
        """\
#cloud-config
# OpenStack: a generated password for the default user, posted once to the metadata service
# encrypted with the instance's first RSA SSH key; read it with `nova get-password SERVER KEY`
# (or `cloudseed instances password ID --key KEY` against cloudseed's own metadata server).
admin_password:
  post_to_metadata: true
  length: 24
""",
    ),
)


def random_password(length: int = 20) -> str:
    import secrets

    return "".join(secrets.choice(_RANDOM_ALPHABET) for _ in range(length))


def collect(ctx: ModuleContext, problems: list[str]) -> tuple[list[tuple[str, str, str]], bool]:
    """([(user, password, text|hash|random, config path)], expire) from the config."""
    cfg = ctx.cfg
    chpasswd = cfg.get("chpasswd") or {}
    if not isinstance(chpasswd, dict):
        problems.append("chpasswd: expected a mapping with 'users' (and 'expire')")
        chpasswd = {}
    wanted: list[tuple[str, str, str, str]] = []
    users = chpasswd.get("users") or []
    if not isinstance(users, list):
        problems.append("chpasswd.users: expected a list")
        users = []
    for index, entry in enumerate(users):
        where = f"chpasswd.users[{index}]"
        if not isinstance(entry, dict) or not entry.get("name"):
            problems.append(f"{where}: expected {{name: ..., password: ..., type: text|hash|RANDOM}}")
            continue
        kind = str(entry.get("type", "hash"))
        if kind not in ("text", "hash", "RANDOM"):
            problems.append(f"{where}.type: {kind!r} is not text, hash or RANDOM")
            continue
        password = entry.get("password")
        if kind == "RANDOM" or password in ("R", "RANDOM") and kind != "hash":
            wanted.append((str(entry["name"]), random_password(), "random", where))
        elif not isinstance(password, str) or not password or "\n" in password:
            problems.append(f"{where}.password: expected a one-line password")
        elif kind == "hash" and not _HASH.match(password):
            problems.append(f"{where}.password: not a crypt hash ($6$..., $y$...); use type: text for a plain one")
        else:
            wanted.append((str(entry["name"]), password, kind, where))
    legacy = chpasswd.get("list")
    if legacy:
        ctx.warn("chpasswd.list is deprecated; use chpasswd.users")
        lines = legacy.splitlines() if isinstance(legacy, str) else legacy
        for index, line in enumerate(lines if isinstance(lines, list) else []):
            where = f"chpasswd.list[{index}]"
            user, sep, password = str(line).partition(":")
            if not sep or not user.strip():
                problems.append(f"{where}: expected 'user:password'")
                continue
            user = user.strip()
            if password in ("R", "RANDOM"):
                wanted.append((user, random_password(), "random", where))
            elif _HASH.match(password):
                wanted.append((user, password, "hash", where))
            else:
                wanted.append((user, password, "text", where))
    if not wanted and cfg.get("password"):
        user = default_user_name(cfg, ctx.distro.default_user())
        if user:
            password = str(cfg["password"])
            if password in ("R", "RANDOM"):
                wanted.append((user, random_password(), "random", "password"))
            else:
                wanted.append((user, password, "hash" if _HASH.match(password) else "text", "password"))
        else:
            ctx.warn("password: there is no default user to set it for")
    return wanted, as_bool(chpasswd.get("expire"), True)


def handle(ctx: ModuleContext) -> None:
    problems: list[str] = []
    wanted, expire = collect(ctx, problems)
    distro = ctx.distro
    applied: list[tuple[str, str, str]] = []
    for user, password, kind, where in wanted:
        if not distro.user_exists(user):
            problems.append(f"{where}: user {user!r} does not exist; password not set")
            continue
        try:
            distro.chpasswd([(user, password)], hashed=(kind == "hash"))
            applied.append((user, password, kind))
        except DistroError as e:
            problems.append(f"{where}: {e}")
    randoms = [(user, password) for user, password, kind in applied if kind == "random"]
    if randoms:
        # console only: this text must never reach the log file or instance data
        ctx.console("Set the following 'random' passwords\n" + "\n".join(f"{u}:{p}" for u, p in randoms),
                    secret=True)
    if applied:
        ctx.log.info("set passwords for %s", ", ".join(sorted({u for u, _, _ in applied})))
    if expire:
        for user in dict.fromkeys(u for u, _, _ in applied):
            try:
                distro.expire_password(user)
            except DistroError as e:
                problems.append(f"chpasswd.expire: {e}")
    try:
        if "ssh_pwauth" in ctx.cfg:  # the ssh module (and what it imports) only when asked
            from cloudseed.agent.modules.ssh import apply_password_auth

            apply_password_auth(ctx)
    except ModuleError as e:
        problems.append(str(e))
    if ctx.cfg.get("admin_password") is not None:
        from cloudseed.agent.modules._admin_password import AdminPasswordError, post_admin_password

        try:
            done = post_admin_password(ctx, default_user_name(ctx.cfg, distro.default_user()))
            ctx.log.info("admin_password: %s", done)
        except AdminPasswordError as e:
            problems.append(str(e))
    if problems:
        raise ModuleError("; ".join(problems))
