"""rh_subscription: register with Red Hat Subscription Management through ``subscription-manager``. RHEL family.

Either ``username`` + ``password`` or ``activation-key`` + ``org`` (cloud-init 25.3 spells the
hyphenated keys with underscores, ``activation_key``..., and deprecates the hyphens: both are read).
A system that already has an identity (``subscription-manager identity`` succeeds) is not
registered again. Then, in order: ``register`` (with ``--baseurl`` from ``rhsm-baseurl`` and
``--serverurl`` from ``server-hostname``), ``attach --auto [--servicelevel=LEVEL]`` when
``auto-attach`` is true, ``attach --pool=ID ...`` for the available pools not consumed yet (one
that is not available is named in the failure, after the rest is done), ``repos --disable=...
--enable=...`` for the repositories not already in that state, then ``release --set=VERSION`` for
``release_version`` (25.3; dnf's and yum's caches are dropped so the pinned release is read).
Unlike cloud-init 22.4 (which then stops), a system that is already registered still gets the
attachments, pools and repositories asked for, and a failed step fails the module (22.4 only logs
a warning).

``subscription-manager`` takes the password and the activation key only on its command line
(it has no stdin or file option for them); they are never logged, never in the status, and any
output line that repeats them is masked. A missing tool is a clear error (it comes with the
``subscription-manager`` package, installed in every RHEL image).
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

KEY = "rh_subscription"
TIMEOUT = 600


def _strings(what: str) -> dict:
    return {"type": "array", "items": {"type": "string"}, "description": what}


MODULE = ModuleSpec(
    name="rh_subscription", stage=STAGE_CONFIG, activate_by=(KEY,), distros=("rhel", "fedora"),
    title="Register with Red Hat Subscription Management",
    schema={"properties": {KEY: {
        "type": "object", "additionalProperties": False,
        "description": "Registration with Red Hat Subscription Management (subscription-manager).",
        "properties": {
            "username": {"type": "string", "description": "The Red Hat account to register with; needs "
                                                          "``password``; not with ``activation-key``."},
            "password": {"type": "string", "description": "The account's password (secret: never logged)."},
            "activation-key": {"type": "string", "description": "The activation key to register with (secret: "
                                                                "never logged); needs ``org``."},
            "org": {"oneOf": [{"type": "string"}, {"type": "integer", "deprecated": True, "deprecated_version": "24.2",
                                                   "deprecated_description": "Use a string."}],
                    "description": "The organization the activation key belongs to."},
            "auto-attach": {"type": "boolean", "description": "Attach the best matching subscriptions "
                                                              "automatically."},
            "service-level": {"type": "string", "description": "The service level for ``auto-attach`` "
                                                               "(needs ``auto-attach: true``)."},
            "add-pool": _strings("Pool ids to attach."),
            "enable-repo": _strings("Repository ids to enable."),
            "disable-repo": _strings("Repository ids to disable."),
            "rhsm-baseurl": {"type": "string", "description": "The content base URL (``baseurl`` of "
                                                              "``/etc/rhsm/rhsm.conf``)."},
            "server-hostname": {"type": "string", "description": "The entitlement server (``serverurl`` of "
                                                                 "``/etc/rhsm/rhsm.conf``)."},
            "release_version": {"type": "string", "description": "Pin the system to this release "
                                                                 "(``subscription-manager release --set``), after "
                                                                 "the repositories are set; dnf's cache is dropped."},
        },
    }}},
    examples=(
        """\
#cloud-config
rh_subscription:
  username: joe@example.com
  password: correct-horse-battery
  auto-attach: true
  service-level: self-support
  add-pool: [8a85f98c60c2c2b40160c32447481b48]
  enable-repo: [rhel-9-for-x86_64-appstream-rpms]
  disable-repo: [rhel-9-for-x86_64-supplementary-rpms]
""",
        """\
#cloud-config
rh_subscription:
  activation-key: my-activation-key
  org: 12345678
  server-hostname: satellite.example.com
  rhsm-baseurl: https://satellite.example.com/pulp/content
""",
    ),
)


class Manager:
    """``subscription-manager`` on the target, with the secrets masked in every message."""

    def __init__(self, ctx: ModuleContext, secrets: Sequence[str]):
        self.ctx = ctx
        self.secrets = [s for s in secrets if s]

    def mask(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[secret]")
        return text

    def run(self, args: list[str], what: str, check: bool = True):
        argv = ["subscription-manager", *args]
        try:
            return self.ctx.root.run(argv, input=b"", env={"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                                     check=check, timeout=TIMEOUT)
        except CommandError as e:
            lines = [ln.strip() for ln in (e.stderr + "\n" + e.stdout).splitlines() if ln.strip()]
            reason = self.mask(lines[-1][:200] if lines else f"exit status {e.returncode}")
            raise ModuleError(f"{KEY}: {what} failed: {reason}") from None


# cloud-init 25.3 spells these keys with underscores (activation_key...) and deprecates the hyphens;
# both are read, the same key given both ways is an error
HYPHENATED = ("activation-key", "auto-attach", "service-level", "add-pool", "enable-repo", "disable-repo",
              "rhsm-baseurl", "server-hostname")
_PROPERTIES = MODULE.schema["properties"][KEY]["properties"]
for _key in HYPHENATED:
    _PROPERTIES[_key.replace("-", "_")] = dict(_PROPERTIES[_key])
    _PROPERTIES[_key] = dict(_PROPERTIES[_key], deprecated=True, deprecated_version="25.3",
                             deprecated_description=f"Use {_key.replace('-', '_')}.")


def normalized(cfg: dict) -> dict:
    """``cfg`` with the underscored spellings read as the hyphenated ones the code below uses."""
    out = dict(cfg)
    for key in HYPHENATED:
        underscored = key.replace("-", "_")
        if underscored in out:
            if key in out:
                raise ModuleError(f"{KEY}: {underscored} and {key} are the same setting; give {underscored} only")
            out[key] = out.pop(underscored)
    return out


def check(cfg: dict) -> None:
    """The combinations cloud-init documents, each problem naming its keys."""
    if bool(cfg.get("username")) != bool(cfg.get("password")):
        raise ModuleError(f"{KEY}: username and password go together (one is missing)")
    key, org = cfg.get("activation-key"), cfg.get("org")
    if bool(key) != (org not in (None, "")):
        raise ModuleError(f"{KEY}: activation-key and org go together (one is missing)")
    if cfg.get("username") and key:
        raise ModuleError(f"{KEY}: give either username/password or activation-key/org, not both")
    if not cfg.get("username") and not key:
        raise ModuleError(f"{KEY}: nothing to register with: give username and password, or activation-key "
                          "and org")
    if cfg.get("service-level") and cfg.get("auto-attach") is not True:
        raise ModuleError(f"{KEY}: service-level needs auto-attach: true")


def register_args(cfg: dict) -> list[str]:
    if cfg.get("activation-key"):
        args = ["register", f"--activationkey={cfg['activation-key']}", f"--org={cfg['org']}"]
    else:
        args = ["register", f"--username={cfg['username']}", f"--password={cfg['password']}"]
    if cfg.get("rhsm-baseurl"):
        args.append(f"--baseurl={cfg['rhsm-baseurl']}")
    if cfg.get("server-hostname"):
        args.append(f"--serverurl={cfg['server-hostname']}")
    return args


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.modules._system_tools import checked

    cfg = normalized(checked(ctx, KEY, MODULE.schema))
    check(cfg)
    if not ctx.root.which("subscription-manager"):
        raise ModuleError(f"{KEY}: subscription-manager is not installed (install the subscription-manager "
                          "package)")
    tool = Manager(ctx, [str(cfg.get("password") or ""), str(cfg.get("activation-key") or "")])
    if tool.run(["identity"], "identity", check=False).returncode == 0:
        ctx.log.info("%s: the system is already registered; not registering again", KEY)
    else:
        tool.run(register_args(cfg), "register")
        ctx.log.info("%s: registered (%s)", KEY, "activation key" if cfg.get("activation-key") else "username")
    if cfg.get("auto-attach") is True:
        level = cfg.get("service-level")
        tool.run(["attach", "--auto", *([f"--servicelevel={level}"] if level else [])], "attach --auto")
    missing = _pools(tool, [p for p in cfg.get("add-pool") or [] if p])
    _repos(tool, cfg.get("enable-repo") or [], cfg.get("disable-repo") or [])
    if cfg.get("release_version"):
        tool.run(["release", f"--set={cfg['release_version']}"], "release --set")
        for cache in ("/var/cache/dnf", "/var/cache/yum"):
            ctx.root.remove_tree(cache)
        ctx.log.info("%s: release set to %s", KEY, cfg["release_version"])
    if missing:
        raise ModuleError(f"{KEY}.add-pool: not available to this system: {', '.join(missing)}")


def _pools(tool: Manager, pools: list[str]) -> list[str]:
    """Attach the available pools not consumed yet; the ones that are neither are returned."""
    if not pools:
        return []
    available = _ids(tool.run(["list", "--available", "--pool-only"], "list --available").stdout)
    consumed = _ids(tool.run(["list", "--consumed", "--pool-only"], "list --consumed").stdout)
    wanted = [p for p in pools if p in available and p not in consumed]
    if wanted:
        tool.run(["attach", *(f"--pool={p}" for p in wanted)], "attach --pool")
    return [p for p in pools if p not in available and p not in consumed]


def _ids(output: str) -> set[str]:
    return {line.strip() for line in output.splitlines() if line.strip()}


def _repo_ids(output: str) -> set[str]:
    return {line.split(":", 1)[1].strip() for line in output.splitlines() if line.strip().startswith("Repo ID:")}


def _repos(tool: Manager, enable: list[str], disable: list[str]) -> None:
    if not enable and not disable:
        return
    enabled = _repo_ids(tool.run(["repos", "--list-enabled"], "repos --list-enabled").stdout)
    args = [f"--disable={r}" for r in disable if r in enabled]
    args += [f"--enable={r}" for r in enable if r not in enabled]
    if args:
        tool.run(["repos", *args], "repos")
