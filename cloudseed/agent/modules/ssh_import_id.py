"""ssh_import_id: import users' SSH keys (``lp:``/``gh:`` ids) with the image's ``ssh-import-id`` tool.

The default user gets the top-level ``ssh_import_id`` list (and its own, merged); every other user
of ``users`` gets its own ``ssh_import_id`` list. The tool runs as that user (``sudo -Hu``, or
``runuser`` where there is no sudo), so the keys land in that user's ``authorized_keys``; cloudseed
fetches nothing itself. Without the tool nothing is imported and the module fails naming the tool
and the users left without their keys. A user that does not exist is named too; the others are
still imported.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec

TOOL = "ssh-import-id"

MODULE = ModuleSpec(
    name="ssh_import_id", stage=STAGE_CONFIG, activate_by=("ssh_import_id", "users", "user"),
    title="Import SSH keys from Launchpad or GitHub ids (ssh-import-id)",
    schema={"properties": {"ssh_import_id": {"type": "array", "items": {"type": "string"}}}},
    examples=(
        "ssh_import_id:\n  - gh:octocat\n  - lp:someone\n",
        "users:\n  - default\n  - name: ops\n    ssh_import_id: [gh:ops-team-member]\n",
    ),
)


def _ids(value, where: str) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, (str, int)) for i in items):
        raise ModuleError(f"{where}: expected a list of ids such as gh:NAME or lp:NAME")
    return [str(i).strip() for i in items if str(i).strip()]


def wanted_imports(ctx: ModuleContext) -> list[tuple[str, list[str], str]]:
    """(user, ids, where) for every user with something to import, in ``users`` order."""
    from cloudseed.agent.users import UsersConfigError, normalize_users

    top = _ids(ctx.cfg.get("ssh_import_id"), "ssh_import_id")
    try:
        users, _warnings = normalize_users(ctx.cfg, ctx.distro.default_user())
    except UsersConfigError as e:
        if top:
            raise ModuleError(f"ssh_import_id: cannot tell who the default user is: {e}") from None
        return []
    out = []
    for request in users:
        ids = _ids(request.spec.get("ssh_import_id"), f"{request.where}.ssh_import_id")
        where = f"{request.where}.ssh_import_id"
        if request.is_default and top:
            ids = list(dict.fromkeys(top + ids))
            where = "ssh_import_id"
        if ids:
            out.append((request.name, ids, where))
    if top and not any(request.is_default for request in users):
        raise ModuleError("ssh_import_id: there is no default user to import these ids for "
                          "(add 'default' to users)")
    return out


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.package_managers.base import failure_reason, record_output
    from cloudseed.core.root import CommandError

    imports = wanted_imports(ctx)
    if not imports:
        return
    if ctx.root.which(TOOL) is None:
        names = ", ".join(user for user, _ids, _where in imports)
        raise ModuleError(f"ssh_import_id: {TOOL} is not installed on the target (the {TOOL} package); "
                          f"keys not imported for: {names}")
    use_sudo = ctx.root.which("sudo") is not None
    failures = []
    for user, ids, where in imports:
        entry = ctx.root.user_entry(user)
        if entry is None:
            failures.append(f"{where}: user {user} does not exist")
            continue
        home = entry[5] if len(entry) > 5 else "/"
        if use_sudo:
            argv = ["sudo", "--preserve-env=https_proxy", "-Hu", user, TOOL, *ids]
        else:
            argv = ["runuser", "-u", user, "--", "env", f"HOME={home}", TOOL, *ids]
        try:
            proc = ctx.root.run(argv, check=False, timeout=120)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except CommandError as e:
            code, out, err = e.returncode, e.stdout, e.stderr
        record_output(ctx.root, " ".join(argv), out, err)
        if code != 0:
            failures.append(f"{where}: {TOOL} failed for {user}: {failure_reason(out, err, code)}")
        else:
            ctx.log.info("imported SSH keys for %s from %s", user, ", ".join(ids))
    if failures:
        raise ModuleError("; ".join(failures))
