"""yum_add_repo: write ``.repo`` files for yum/dnf from ``yum_repos`` (RHEL family).

Each ``yum_repos`` entry is a repository id (spaces become ``-``) written to
``<yum_repo_dir>/<id>.repo`` (default ``/etc/yum.repos.d``); every option is passed through as
cloud-init does: names lower-cased with ``-`` as ``_``, booleans as 1/0, lists one value per
(indented continuation) line. A repository needs ``baseurl``, ``metalink`` or ``mirrorlist``;
one without is reported by id and left out, the others are still written. An existing file is
kept (as cloud-init does: the image or an earlier instance owns it).
"""

from __future__ import annotations

import re

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec

DEFAULT_DIR = "/etc/yum.repos.d"
LOCATION_KEYS = ("baseurl", "metalink", "mirrorlist")
_VALUE = {"oneOf": [{"type": "integer"}, {"type": "boolean"}, {"type": "string"},
                    {"type": "array", "items": {"type": ["string", "integer", "boolean"]}}]}

MODULE = ModuleSpec(
    name="yum_add_repo", stage=STAGE_CONFIG, activate_by=("yum_repos",), distros=("rhel",),
    title="Add yum/dnf repository files",
    schema={"properties": {
        "yum_repo_dir": {"type": "string", "description": "Directory of the .repo files (default /etc/yum.repos.d)."},
        "yum_repos": {
            "type": "object",
            "description": "Repositories by id; each option is written to <yum_repo_dir>/<id>.repo (man yum.conf, "
                           "man dnf.conf). One of baseurl, metalink or mirrorlist is required.",
            "additionalProperties": {
                "type": "object",
                "anyOf": [{"required": [key]} for key in LOCATION_KEYS],
                "properties": {
                    "baseurl": {**_VALUE, "description": "URL(s) of the directory holding repodata/."},
                    "metalink": {"type": "string", "description": "URL of a metalink file listing mirrors."},
                    "mirrorlist": {"type": "string", "description": "URL of a file listing baseurls."},
                    "name": {"type": "string", "description": "Human-readable name of the repository."},
                    "enabled": {"type": ["boolean", "integer"], "description": "Whether the repository is used."},
                    "gpgcheck": {"type": ["boolean", "integer"], "description": "Check package signatures."},
                    "gpgkey": {**_VALUE, "description": "URL(s) of the signing key(s)."},
                },
                "additionalProperties": _VALUE,
            },
        },
    }},
    examples=(
        "yum_repos:\n  epel-testing:\n    name: EPEL testing\n    baseurl: https://mirror.example.com/epel/9/$basearch\n"
        "    enabled: false\n    gpgcheck: true\n    gpgkey: file:///etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9\n",
        "yum_repo_dir: /etc/yum.repos.d\nyum_repos:\n  my repo:\n"
        "    metalink: https://mirrors.example.com/metalink?repo=x&arch=$basearch\n",
    ),
)


def format_value(value: object) -> str:
    """A repo option as yum/dnf read it: booleans 1/0, lists one per line."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "\n".join(format_value(v) for v in value)
    return str(value)


def render_repo(repo_id: str, options: dict[str, object]) -> str:
    from cloudseed.agent.distros import file_header

    lines = [file_header(), f"[{repo_id}]"]
    for key, value in options.items():
        first, *rest = format_value(value).split("\n")
        lines.append(f"{key} = {first}".rstrip())
        lines.extend(f"\t{line}" for line in rest)
    return "\n".join(lines) + "\n\n"


def handle(ctx: ModuleContext) -> None:
    repos = ctx.cfg.get("yum_repos")
    if not isinstance(repos, dict):
        raise ModuleError("yum_repos: expected a mapping of repository id -> options")
    directory = str(ctx.cfg.get("yum_repo_dir") or DEFAULT_DIR).rstrip("/") or "/"
    problems: list[str] = []
    pending: dict[str, str] = {}
    for name, config in repos.items():
        repo_id = str(name).strip().replace(" ", "-")
        where = f"yum_repos.{name}"
        if not re.fullmatch(r"[A-Za-z0-9_.:@+-]+", repo_id):
            problems.append(f"{where}: {name!r} is not a usable repository id (letters, digits, - _ . : @ +)")
            continue
        if config is not None and not isinstance(config, dict):
            problems.append(f"{where}: expected a mapping of options")
            continue
        options: dict[str, object] = {}
        for key, value in (config or {}).items():
            canon = str(key).lower().strip().replace("-", "_")
            if canon:
                options[canon] = value
        if not any(options.get(k) not in (None, "", []) for k in LOCATION_KEYS):
            problems.append(f"{where}: needs baseurl, metalink or mirrorlist; not written")
            continue
        path = f"{directory}/{repo_id}.repo"
        if ctx.root.exists(path):
            ctx.log.info("%s: %s already exists; kept", where, path)
            continue
        if path in pending:
            ctx.log.info("%s: %s is already written for another entry; skipped", where, path)
            continue
        pending[path] = render_repo(repo_id, options)
    for path, text in pending.items():
        ctx.root.write(path, text, mode=0o644)
    ctx.log.info("wrote %d repository file(s)", len(pending))
    if problems:
        raise ModuleError("; ".join(problems))
