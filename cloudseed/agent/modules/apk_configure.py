"""apk_configure: Alpine's package repositories (``/etc/apk/repositories``) from ``apk_repos``.

The file lists the ``main`` repository of ``alpine_repo.version`` at ``base_url``, then
``community`` and edge ``testing`` when enabled, then a local repository. Alpine only: on other
systems the keys are reported as not applicable (the module framework does that).
"""

from __future__ import annotations

from cloudseed.agent.distros import file_header
from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.values import as_bool

DEFAULT_MIRROR = "https://alpine.global.ssl.fastly.net/alpine"
REPOSITORIES = "/etc/apk/repositories"

MODULE = ModuleSpec(
    name="apk_configure", stage=STAGE_CONFIG, activate_by=("apk_repos",), distros=("alpine",),
    title="Configure Alpine's apk repositories",
    schema={"properties": {"apk_repos": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "preserve_repositories": {"type": "boolean", "default": False,
                                      "description": "Leave /etc/apk/repositories as the image has it."},
            "alpine_repo": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "required": ["version"],
                "properties": {
                    "base_url": {"type": "string", "description": f"Mirror (default {DEFAULT_MIRROR})."},
                    "community_enabled": {"type": "boolean", "default": False},
                    "testing_enabled": {"type": "boolean", "default": False},
                    "version": {"type": "string", "description": "Alpine release, such as 'v3.20' or 'edge'."},
                },
            },
            "local_repo_base_url": {"type": "string", "description": "A local repository's base URL."},
        },
    }}},
    examples=(
        """\
#cloud-config
apk_repos:
  alpine_repo:
    version: v3.20
    community_enabled: true
""",
        """\
#cloud-config
apk_repos:
  preserve_repositories: false
  alpine_repo:
    base_url: https://mirror.example.com/alpine
    version: edge
    testing_enabled: true
  local_repo_base_url: https://repo.example.com/alpine/local
""",
    ),
)


def repositories(section: dict) -> str:
    """The repositories file for ``apk_repos`` (ModuleError naming the key when unusable)."""
    repo = section.get("alpine_repo") or {}
    if not isinstance(repo, dict) or not isinstance(repo.get("version"), str) or not repo["version"]:
        raise ModuleError("apk_repos.alpine_repo.version: missing (the Alpine release, such as 'v3.20')")
    base = str(repo.get("base_url") or DEFAULT_MIRROR).rstrip("/")
    version = repo["version"]
    for key, value in (("alpine_repo.base_url", base), ("alpine_repo.version", version),
                       ("local_repo_base_url", str(section.get("local_repo_base_url") or ""))):
        if any(c.isspace() for c in value):
            raise ModuleError(f"apk_repos.{key}: must not contain spaces or line breaks")
    lines = [file_header("Created"), "", f"{base}/{version}/main"]
    if as_bool(repo.get("community_enabled")):
        lines.append(f"{base}/{version}/community")
    if as_bool(repo.get("testing_enabled")):
        if version != "edge":
            lines.append("# testing packages on a release other than edge may break the system")
        lines.append(f"{base}/edge/testing")
    local = str(section.get("local_repo_base_url") or "").rstrip("/")
    if local:
        lines += ["", "# local repository", f"{local}/{version}"]
    return "\n".join(lines) + "\n"


def handle(ctx: ModuleContext) -> None:
    section = ctx.cfg.get("apk_repos")
    if not isinstance(section, dict):
        raise ModuleError("apk_repos: expected a mapping")
    if as_bool(section.get("preserve_repositories")):
        ctx.log.info("apk repositories preserved (apk_repos.preserve_repositories)")
        return
    if not section.get("alpine_repo"):
        ctx.log.info("no apk_repos.alpine_repo: repositories left as they are")
        return
    ctx.root.write(REPOSITORIES, repositories(section), mode=0o644)
    ctx.log.info("apk repositories written to %s", REPOSITORIES)
