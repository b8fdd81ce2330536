"""zypper_add_repo: zypper repositories (``/etc/zypp/repos.d/ID.repo``) and ``zypp.conf`` settings (SUSE).

``zypper.repos`` entries need ``id`` and ``baseurl``; every other key is written as given
(booleans as 1/0, lists one per line), with ``enabled`` and ``autorefresh`` on by default. A
repository file that exists already is left alone. ``zypper.config`` settings are appended to
``/etc/zypp/zypp.conf`` (``configdir`` cannot be moved). openSUSE and SLES only: elsewhere the keys
are reported as not applicable.
"""

from __future__ import annotations

import re

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec

REPOS_DIR = "/etc/zypp/repos.d"
ZYPP_CONF = "/etc/zypp/zypp.conf"
_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")

MODULE = ModuleSpec(
    name="zypper_add_repo", stage=STAGE_CONFIG, activate_by=("zypper",),
    distros=("suse", "opensuse", "opensuse-leap", "opensuse-tumbleweed", "sles", "sled", "sle-micro"),
    title="Add zypper repositories and zypp.conf settings",
    schema={"properties": {"zypper": {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": True,
        "properties": {
            "repos": {"type": "array", "items": {
                "type": "object",
                "required": ["id", "baseurl"],
                "additionalProperties": True,
                "properties": {
                    "id": {"type": "string", "description": "Repository ID (the file name, spaces become _)."},
                    "baseurl": {"type": "string", "format": "uri", "description": "Repository URL."},
                },
            }},
            "config": {"type": "object", "description": "zypp.conf settings to add (not configdir)."},
        },
    }}},
    examples=(
        """\
#cloud-config
zypper:
  repos:
    - id: company-tools
      name: Company tools for Leap 15.6
      baseurl: https://packages.example.com/suse/leap-15.6/
      gpgcheck: true
      priority: 90
  config:
    download.use_deltarpm: false
    solver.onlyRequires: true
""",
    ),
)


def _value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return "\n    ".join(_value(v) for v in value)
    text = str(value)
    if "\n" in text:
        raise ValueError("line break")
    return text


def repo_file(entry: dict, where: str) -> tuple[str, str]:
    """(file name, content) for one ``zypper.repos`` entry."""
    for key in ("id", "baseurl"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise ModuleError(f"{where}.{key}: missing")
    repo_id = entry["id"].strip()
    if "/" in repo_id or "]" in repo_id or "\n" in repo_id:
        raise ModuleError(f"{where}.id: not usable as a repository ID")
    settings = {str(k).lower().strip().replace("-", "_"): v for k, v in entry.items() if k != "id"}
    settings.setdefault("enabled", "1")
    settings.setdefault("autorefresh", "1")
    lines = [f"[{repo_id}]"]
    for key, value in settings.items():
        if not _KEY.match(key):
            raise ModuleError(f"{where}.{key}: not a usable option name")
        try:
            lines.append(f"{key}={_value(value)}")
        except ValueError:
            raise ModuleError(f"{where}.{key}: contains a line break") from None
    return f"{repo_id.replace(' ', '_')}.repo", "\n".join(lines) + "\n"


def handle(ctx: ModuleContext) -> None:
    section = ctx.cfg.get("zypper")
    if not isinstance(section, dict):
        raise ModuleError("zypper: expected a mapping with repos and/or config")
    repos = section.get("repos") or []
    if not isinstance(repos, list):
        raise ModuleError("zypper.repos: expected a list of repositories")
    files = {}
    for index, entry in enumerate(repos):
        if not isinstance(entry, dict):
            raise ModuleError(f"zypper.repos[{index}]: expected a mapping with id and baseurl")
        name, content = repo_file(entry, f"zypper.repos[{index}]")
        if name in files or ctx.root.exists(f"{REPOS_DIR}/{name}"):
            ctx.log.info("zypper repository %s exists already: left as it is", name[:-5])
            continue
        files[name] = content
    settings = _zypp_settings(ctx, section.get("config") or {})
    for name, content in files.items():   # everything checked before anything is written
        ctx.root.write(f"{REPOS_DIR}/{name}", content, mode=0o644)
    if settings:
        current = ctx.root.read_text(ZYPP_CONF, default="")
        if current and not current.endswith("\n"):
            current += "\n"
        ctx.root.write(ZYPP_CONF, current + "# Added from cloud-config by cloudseed\n" + "".join(
            f"{k}={v}\n" for k, v in settings), mode=0o644, keep_mode=True)
    ctx.log.info("zypper: %d repositories added, %d zypp.conf settings", len(files), len(settings))


def _zypp_settings(ctx: ModuleContext, config: dict) -> list[tuple[str, str]]:
    if not isinstance(config, dict):
        raise ModuleError("zypper.config: expected a mapping of zypp.conf settings")
    out = []
    for key, value in config.items():
        if key == "configdir":
            ctx.warn("zypper.config.configdir: moving zypper's configuration is not supported; left as it is")
            continue
        if not _KEY.match(str(key)):
            raise ModuleError(f"zypper.config.{key}: not a usable setting name")
        if value in (None, "", False):
            continue
        try:
            out.append((str(key), _value(value)))
        except ValueError:
            raise ModuleError(f"zypper.config.{key}: contains a line break") from None
    return out
