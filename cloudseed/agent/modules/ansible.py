"""ansible: install Ansible, then ``ansible-pull`` a playbook repository, run galaxy and controller steps.

Install: ``install_method: distro`` (default) installs ``package_name`` (default ``ansible``;
``ansible-core`` is the small one) through the distro's package manager when ``ansible-pull`` is
missing; ``install_method: pip`` installs it with ``python3 -m pip`` (``--user`` when ``run_user``
is set; ``--break-system-packages`` where pip knows it), installing the distro's pip first when
needed. Every command runs as ``run_user`` when given (``runuser -u USER``, with that user's
HOME and ``~/.local/bin`` on PATH), as root otherwise; ``ansible_config`` sets ANSIBLE_CONFIG.
Then, in this order: ``galaxy.actions`` (each a command, e.g. ``[ansible-galaxy, collection,
install, community.general]``); ``pull`` (a list since cloud-init 25.2; one mapping, deprecated,
still read), for each: ``ansible-pull --url=URL [--OPTION=VALUE | --FLAG]... PLAYBOOK...`` with its
``playbook_names`` (or the older ``playbook_name``; one run per playbook on Ansible before 2.12)
(an option ``x_y: v`` becomes ``--x-y=v``, ``true`` a bare flag, ``false`` nothing);
``setup_controller``: each of ``repositories`` is ``git clone``d to its path and each of
``run_ansible`` runs ``ansible-playbook`` in its ``playbook_dir``. Each command is bounded in
time (``PULL_SECONDS``); its output goes to /var/log/cloudseed-output.log, and a failure names
the step and the command's last line of output.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._system_tools import checked, install_packages
from cloudseed.core.root import CommandError

KEY = "ansible"
PULL_SECONDS = 3600.0  # one ansible-pull / ansible-playbook / galaxy / pip run
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_STR = {"type": "string"}
_FLAG = {"type": "boolean", "default": False}
_PULL_OPTIONS = {
    "url": dict(_STR, description="URL of the playbook repository (required)."),
    "playbook_name": dict(_STR, description="One playbook to run, relative to the repository.", deprecated=True,
                          deprecated_version="25.2", deprecated_description="Use playbook_names."),
    "playbook_names": {"type": "array", "items": _STR, "minItems": 1,
                       "description": "Playbooks to run, relative to the repository (cloud-init 25.2)."},
    "checkout": dict(_STR, description="Branch, tag or commit to check out."),
    "full": dict(_FLAG, description="Clone the whole history instead of a shallow clone."),
    "diff": dict(_FLAG, description="Show the changes made to files."),
    "accept_host_key": dict(_FLAG, description="Accept the repository host's SSH key."),
    "clean": dict(_FLAG, description="Discard local changes in the checkout."),
    "verify_commit": dict(_FLAG, description="Verify the GPG signature of the checked-out commit."),
    "connection": dict(_STR, description="Connection type (``local`` by default in pull mode)."),
    "module_name": dict(_STR, description="Repository module (``git`` by default)."),
    "module_path": dict(_STR, description="Extra module paths."),
    "private_key": dict(_STR, description="Path of an SSH private key for the repository."),
    "vault_id": dict(_STR, description="Vault identity to use."),
    "vault_password_file": dict(_STR, description="Path of a vault password file."),
    "inventory": dict(_STR, description="Inventory path or host list."),
    "ssh_common_args": dict(_STR, description="Extra arguments of sftp/scp/ssh."),
    "scp_extra_args": dict(_STR, description="Extra arguments of scp."),
    "sftp_extra_args": dict(_STR, description="Extra arguments of sftp."),
    "skip_tags": dict(_STR, description="Only run plays and tasks not tagged with these."),
    "tags": dict(_STR, description="Only run plays and tasks tagged with these."),
    "timeout": dict(_STR, description="Connection timeout in seconds (ansible's ``--timeout``)."),
    "sleep": dict(_STR, description="Sleep a random time up to this many seconds before starting."),
}
# one pull: a repository and its playbooks (playbook_names since cloud-init 25.2, or the older playbook_name)
_PULL = {"type": "object", "additionalProperties": False, "properties": _PULL_OPTIONS,
         "oneOf": [{"required": ["url", "playbook_names"]}, {"required": ["url", "playbook_name"]}]}
_RUN_ANSIBLE = {
    "type": "object",
    "required": ["playbook_name", "playbook_dir"],
    "properties": {
        "playbook_name": dict(_STR, description="Playbook to run."),
        "playbook_dir": dict(_STR, description="Directory it is run from."),
        **{k: _STR for k in ("become_password_file", "connection_password_file", "vault_id",
                             "vault_password_file", "module_path", "args", "extra_vars", "inventory",
                             "scp_extra_args", "sftp_extra_args", "private_key", "connection", "module_name",
                             "sleep", "tags", "skip_tags")},
        **{k: _FLAG for k in ("list_hosts", "syntax_check", "check", "diff")},
        **{k: {"type": "number", "minimum": 0} for k in ("timeout", "background", "poll", "forks")},
    },
}

MODULE = ModuleSpec(
    name=KEY, stage=STAGE_FINAL, activate_by=(KEY,),
    title="Install Ansible and run ansible-pull",
    schema={"properties": {KEY: {
        "type": "object",
        "additionalProperties": False,
        "description": "Install Ansible, then run galaxy actions, ansible-pull and controller playbooks.",
        "properties": {
            "install_method": {"type": "string", "enum": ["distro", "pip"], "default": "distro",
                               "description": "``distro``: the distro's package; ``pip``: python3 -m pip."},
            "package_name": {"type": "string", "default": "ansible",
                             "description": "Package to install (``ansible`` or ``ansible-core``)."},
            "run_user": {"type": "string", "description": "User every command runs as (and the pip install, "
                                                          "with --user). Default: root."},
            "ansible_config": {"type": "string", "description": "Sets ANSIBLE_CONFIG (a config file path)."},
            "galaxy": {"type": "object", "required": ["actions"], "additionalProperties": False,
                       "description": "ansible-galaxy commands run before the pull.",
                       "properties": {"actions": {"type": "array", "items": {
                           "type": "array", "minItems": 1, "items": {"type": "string"}},
                           "description": "Each a command as a list of words."}}},
            "pull": {"oneOf": [{"type": "array", "items": _PULL, "minItems": 1},
                               dict(_PULL, deprecated=True, deprecated_version="25.2",
                                    deprecated_description="Give a list of pulls.")],
                     "description": "Run ``ansible-pull`` against playbook repositories, one after the other."},
            "setup_controller": {
                "type": "object", "additionalProperties": False,
                "description": "Make this instance an Ansible controller: clone repositories, run playbooks.",
                "properties": {
                    "repositories": {"type": "array", "items": {
                        "type": "object", "required": ["path", "source"], "additionalProperties": False,
                        "properties": {"path": dict(_STR, description="Where to clone it."),
                                       "source": dict(_STR, description="Repository URL.")}}},
                    "run_ansible": {"type": "array", "items": _RUN_ANSIBLE},
                },
            },
        },
    }}},
    examples=(
        """\
#cloud-config
ansible:
  install_method: distro
  package_name: ansible-core
  pull:
    - url: https://github.com/holmanb/vmboot.git
      playbook_names: [ubuntu.yml]
""",
        """\
#cloud-config
ansible:
  install_method: pip
  package_name: ansible-core
  run_user: ubuntu
  galaxy:
    actions:
      - [ansible-galaxy, collection, install, community.general]
  pull:
    - url: https://git.example.com/playbooks.git
      playbook_names: [site.yml, hardening.yml]
      checkout: main
      accept_host_key: true
      skip_tags: slow
""",
        """\
#cloud-config
ansible:
  package_name: ansible-core
  setup_controller:
    repositories:
      - path: /home/ansible/my-repo/
        source: https://github.com/holmanb/ansible-lxd-private.git
    run_ansible:
      - playbook_dir: /home/ansible/my-repo
        playbook_name: start-lxd.yml
        timeout: 120
        forks: 1
""",
    ),
)


def option_args(options: dict) -> list[str]:
    """``{x_y: v, flag: true, off: false}`` -> ``[--x-y=v, --flag]``, in the given order."""
    out = []
    for name, value in options.items():
        if value is False or value is None:
            continue
        flag = "--" + str(name).replace("_", "-")
        out.append(flag if value is True else f"{flag}={value}")
    return out


def playbooks(pull: dict) -> list[str]:
    """A pull's playbooks: ``playbook_names``, or the older single ``playbook_name``."""
    if pull.get("playbook_name") and pull.get("playbook_names"):
        raise ModuleError("ansible.pull: playbook_name and playbook_names are exclusive; use playbook_names")
    return [str(p) for p in pull.get("playbook_names") or [pull.get("playbook_name")]]


def pull_command(pull: dict) -> list[str]:
    options = {k: v for k, v in pull.items() if k not in ("playbook_name", "playbook_names")}
    return ["ansible-pull", *option_args(options), *playbooks(pull)]


class Runner:
    """Runs commands on the target as ``run_user`` (runuser) or root, with Ansible's environment."""

    def __init__(self, ctx: ModuleContext, user: str | None, ansible_config: str | None):
        self.ctx = ctx
        self.user = user
        home = "/root"
        if user:
            entry = ctx.root.user_entry(user)
            if entry is None:
                raise ModuleError(f"ansible.run_user: user {user!r} does not exist on the target")
            home = entry[5] if len(entry) > 5 and entry[5] else "/"
        self.home = home
        self.env = {"HOME": home, "PATH": f"{PATH}:{home.rstrip('/')}/.local/bin", "LANG": "C.UTF-8",
                    "ANSIBLE_FORCE_COLOR": "0"}
        if user:
            self.env.update({"USER": user, "LOGNAME": user})
        if ansible_config:
            self.env["ANSIBLE_CONFIG"] = ansible_config

    def argv(self, command: list[str]) -> list[str]:
        env = [f"{k}={v}" for k, v in self.env.items()]
        if self.user:
            return ["runuser", "-u", self.user, "--", "env", *env, *command]
        return ["env", *env, *command]

    def run(self, what: str, command: list[str], cwd: str | None = None) -> str:
        import shlex

        from cloudseed.agent.package_managers.base import record_output

        workdir = cwd or (self.home if self.ctx.root.isdir(self.home) else "/")
        if cwd and not self.ctx.root.isdir(cwd):
            raise ModuleError(f"{what}: directory {cwd} does not exist")
        title = _redact(shlex.join(command))
        try:
            proc = self.ctx.root.run(self.argv(command), check=False, timeout=PULL_SECONDS, cwd=workdir,
                                     env={"PATH": PATH})
        except CommandError as e:  # not found, or timed out
            record_output(self.ctx.root, title, e.stdout, e.stderr)
            raise ModuleError(f"{what}: {command[0]}: {_redact(e.stderr.strip()) or e.returncode}") from None
        record_output(self.ctx.root, title, _redact(proc.stdout), _redact(proc.stderr))
        if proc.returncode != 0:
            raise ModuleError(f"{what}: {command[0]} exited {proc.returncode}: {_redact(_telling_line(proc))}")
        return proc.stdout


def _telling_line(proc) -> str:
    """The line of ansible's output that says what went wrong (with a failed task's ``msg``)."""
    lines = [line.strip() for line in (proc.stderr + "\n" + proc.stdout).splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith(("ERROR!", "fatal:", "error:")) or "FAILED!" in line or "UNREACHABLE!" in line:
            message = next((m for m in lines[index + 1:index + 30] if m.startswith('"msg":')), "")
            return (line + (" " + message if message else ""))[:300]
    return lines[-1][:300] if lines else "no output"


def handle(ctx: ModuleContext) -> None:
    cfg = checked(ctx, KEY, MODULE.schema)
    controller = cfg.get("setup_controller")
    if controller is not None and not (controller.get("repositories") or controller.get("run_ansible")):
        raise ModuleError("ansible.setup_controller: give repositories or run_ansible")
    if not (cfg.get("pull") or cfg.get("galaxy") or controller):
        ctx.warn("ansible: nothing to run (no pull, galaxy or setup_controller); only installing")
    runner = Runner(ctx, cfg.get("run_user"), cfg.get("ansible_config"))
    package = cfg.get("package_name") or "ansible"
    if cfg.get("install_method", "distro") == "pip":
        _install_with_pip(ctx, runner, package)
    elif not ctx.root.which("ansible-pull"):
        install_packages(ctx, KEY, [(package, None)])
    if not _has_ansible(ctx, runner):
        raise ModuleError(f"ansible: ansible-pull is not available after installing {package} "
                          "(install ansible-core, or set ansible.package_name)")
    for index, action in enumerate((cfg.get("galaxy") or {}).get("actions") or []):
        runner.run(f"ansible.galaxy.actions[{index}]", [str(word) for word in action])
    pulls = cfg.get("pull") or []
    for index, pull in enumerate([pulls] if isinstance(pulls, dict) else pulls):
        where = "ansible.pull" if isinstance(pulls, dict) else f"ansible.pull[{index}]"
        version = _version(runner) if pull.get("diff") or len(playbooks(pull)) > 1 else (99, 0)
        if pull.get("diff") and version < (2, 7):
            raise ModuleError(f"{where}.diff: this Ansible is older than 2.7 and has no --diff")
        # several playbooks in one ansible-pull since Ansible 2.12; one run each before
        commands = [pull_command(pull)] if version >= (2, 12) else [
            pull_command({**pull, "playbook_names": [book], "playbook_name": None}) for book in playbooks(pull)]
        for command in commands:
            runner.run(where, command)
        ctx.log.info("ansible-pull of %s (%s) finished", _redact(pull["url"]), ", ".join(playbooks(pull)))
    for index, repo in enumerate((controller or {}).get("repositories") or []):
        runner.run(f"ansible.setup_controller.repositories[{index}]", ["git", "clone", repo["source"], repo["path"]])
    for index, play in enumerate((controller or {}).get("run_ansible") or []):
        options = {k: v for k, v in play.items() if k not in ("playbook_dir", "playbook_name")}
        runner.run(f"ansible.setup_controller.run_ansible[{index}]",
                   ["ansible-playbook", play["playbook_name"], *option_args(options)], cwd=play["playbook_dir"])


def _redact(text: str) -> str:
    """``text`` with the credentials of any URL in it (``//user:token@``) masked: it reaches logs and status."""
    import re

    return re.sub(r"//[^/@\s]*@", "//***@", text)


def _has_ansible(ctx: ModuleContext, runner: Runner) -> bool:
    if ctx.root.which("ansible-pull"):
        return True
    return ctx.root.isfile(f"{runner.home.rstrip('/')}/.local/bin/ansible-pull")


def _version(runner: Runner) -> tuple[int, ...]:
    import re

    first = (runner.run("ansible.pull", ["ansible-pull", "--version"]).splitlines() or [""])[0]
    found = re.search(r"(\d+)\.(\d+)", first)
    return (int(found.group(1)), int(found.group(2))) if found else (99, 0)


def _install_with_pip(ctx: ModuleContext, runner: Runner, package: str) -> None:
    if _has_ansible(ctx, runner):
        return
    python = ctx.root.which("python3")
    if not python:
        install_packages(ctx, KEY, [("python3", None), ("python3-pip", None)])
        python = "python3"
    try:
        version_text = runner.run("ansible.install_method pip", [python, "-m", "pip", "--version"])
    except ModuleError:
        install_packages(ctx, KEY, [("python3-pip", None)])
        version_text = runner.run("ansible.install_method pip", [python, "-m", "pip", "--version"])
    command = [python, "-m", "pip", "install", "--no-input"]
    words = version_text.split()
    if len(words) > 1 and _at_least(words[1], (23, 0, 1)):
        command.append("--break-system-packages")  # Debian 12's pip refuses the system site otherwise
    if runner.user:
        command.append("--user")
    runner.run("ansible.install_method pip", [*command, package])


def _at_least(version: str, wanted: tuple[int, ...]) -> bool:
    parts = []
    for word in version.split(".")[:3]:
        digits = "".join(ch for ch in word if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts) >= wanted
