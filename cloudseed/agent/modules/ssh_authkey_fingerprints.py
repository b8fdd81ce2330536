"""ssh_authkey_fingerprints: show the fingerprints of each configured user's authorized keys on the console.

One table per user (the default user and ``users`` entries that have a home), hash from
``authkey_hash`` (default sha256). ``no_ssh_fingerprints: true`` turns it off. Console only.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.sshkeys import fingerprint, read_authorized_keys
from cloudseed.agent.users import UsersConfigError, normalize_users
from cloudseed.core.values import as_bool

MODULE = ModuleSpec(
    name="ssh_authkey_fingerprints", stage=STAGE_FINAL,
    title="Log the fingerprints of users' authorized SSH keys",
    schema={"properties": {
        "no_ssh_fingerprints": {"type": "boolean"},
        "authkey_hash": {"type": "string"},
    }},
    examples=(
        """\
#cloud-config
# Log the fingerprints of authorized keys as SHA-512 digests.
authkey_hash: sha512
""",
        """\
#cloud-config
no_ssh_fingerprints: true
""",
    ),
)


def table(rows: list[list[str]], headers: list[str]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(row: list[str]) -> str:
        return "|" + "|".join(f" {str(c):<{w}} " for c, w in zip(row, widths)) + "|"

    return [rule, line(headers), rule] + [line(r) for r in rows] + [rule]


def render_user(user: str, path: str, keys, method: str) -> list[str]:
    if not keys:
        return [f"no authorized SSH keys fingerprints found for user {user}."]
    rows = [[k.keytype, fingerprint(k.blob, method), k.options or "-", k.comment or "-"] for k in keys]
    body = table(rows, ["Keytype", f"Fingerprint ({method})", "Options", "Comment"])
    title = f" Authorized keys from {path} for user {user} "
    return [title.center(len(body[0]), "+")] + body


def handle(ctx: ModuleContext) -> None:
    if as_bool(ctx.cfg.get("no_ssh_fingerprints"), False):
        return
    method = str(ctx.cfg.get("authkey_hash") or "sha256").lower()
    import hashlib

    if method not in hashlib.algorithms_available:
        raise ModuleError(f"authkey_hash: {method!r} is not a hash this system knows")
    try:
        users, _ = normalize_users(ctx.cfg, ctx.distro.default_user())
    except UsersConfigError as e:
        raise ModuleError(str(e)) from None
    for request in users:
        if as_bool(request.spec.get("no_create_home"), False) or as_bool(request.spec.get("system"), False):
            continue
        if ctx.root.user_entry(request.name) is None:
            continue
        path, keys = read_authorized_keys(ctx.root, request.name)
        for line in render_user(request.name, path, keys, method):
            ctx.console(f"ci-info: {line}")
