"""ssh: host keys, the default user's and root's authorized keys, and sshd password settings.

Per instance: old host keys are deleted (``ssh_deletekeys``, default true) and the key types of
``ssh_genkeytypes`` are generated side by side, or the pairs and certificates given in
``ssh_keys`` are installed (checked first; a bad one is reported and not written). The
datasource's public keys (``allow_public_ssh_keys``) and ``ssh_authorized_keys`` go to the
default user; root gets them behind ``disable_root_opts`` when ``disable_root`` is true.
``ssh_pwauth`` sets ``PasswordAuthentication``; ``ssh_publish_hostkeys`` records the public host
keys in instance data. Default key types are rsa, ecdsa and ed25519 (DSA only when asked for).

At boot the host keys of a new instance are started in the local stage, in the background: the
fast types (ecdsa, ed25519) at niceness 0, RSA alongside at niceness 10 (it takes seconds of CPU;
at 0 it slowed the whole first boot). This module adopts the keys that are done; an RSA key still
being generated does not hold sshd back: a background helper installs it when it lands, so sshd
serves RSA some seconds after it first answers and after "boot finished" (docs/lab.md has the
measured times). OpenSSH before 9.8 loads the host keys in each connection's own process and
needs no reload (none is done: a reload drops the logins arriving meanwhile); from 9.8 (an
``sshd-session`` binary) sshd is reloaded once (``systemctl reload-or-try-restart``).
"""

from __future__ import annotations

import re
import time

from cloudseed.agent import hostkeys
from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules import _sshd_config as sshd_config
from cloudseed.agent.sshkeys import DISABLE_ROOT_OPTS, SshKeyError, install_authorized_keys, parse_key
from cloudseed.agent.users import default_user_name
from cloudseed.core.root import CommandError, RootError
from cloudseed.core.values import as_bool, get_list

DEFAULT_KEY_TYPES = list(hostkeys.DEFAULT_TYPES)
PUBLISH_EXCLUDE = ["dsa"]
_KEY_NAME = re.compile(r"^(rsa|dsa|ecdsa|ed25519)_(private|public|certificate)$")
_PRIVATE = re.compile(r"^-----BEGIN ([A-Z0-9 ]+ )?PRIVATE KEY-----\n.+\n-----END ([A-Z0-9 ]+ )?PRIVATE KEY-----\s*$",
                      re.DOTALL)

MODULE = ModuleSpec(
    name="ssh", stage=STAGE_INIT,
    title="Configure SSH: host keys, authorized keys, password authentication",
    schema={"properties": {
        # no DSA: cloud-init 24.1 dropped it from the schema and skips such entries (so does this module)
        "ssh_keys": {"type": "object", "patternProperties": {
            "^(rsa|ecdsa|ed25519)_(private|public|certificate)$": {"type": "string"}},
            "additionalProperties": False},
        # no DSA here either (cloud-init 24.1's schema); generated still when asked, as cloud-init still tries
        "ssh_genkeytypes": {"type": "array", "minItems": 1,
                            "items": {"type": "string", "enum": [t for t in hostkeys.KNOWN_TYPES if t != "dsa"]}},
        "ssh_deletekeys": {"type": "boolean"},
        "ssh_authorized_keys": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "disable_root": {"type": "boolean"},
        "disable_root_opts": {"type": "string"},
        "allow_public_ssh_keys": {"type": "boolean"},
        "ssh_quiet_keygen": {"type": "boolean"},
        "ssh_pwauth": {"oneOf": [{"type": "boolean"},
                                 {"type": "string", "enum": ["unchanged", "yes", "no", "true", "false"],
                                  "deprecated": True, "deprecated_description": "Use a boolean."}]},
        "ssh_publish_hostkeys": {"type": "object", "properties": {
            "enabled": {"type": "boolean"}, "blacklist": {"type": "array", "items": {"type": "string"}}},
            "additionalProperties": False},
    }},
    examples=(
        """\
#cloud-config
# Authorise a key for the default user, refuse root logins, generate only these host key types.
ssh_authorized_keys:
  - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEHq3ZW5AGp7BR7t3ElqpEcDJL0BHWKE3T1x8gmcqz/N admin@example.org
disable_root: true
ssh_deletekeys: true
ssh_genkeytypes: [ed25519, ecdsa]
""",
        """\
#cloud-config
# Install a host key pair instead of generating one (an example key: never reuse it).
ssh_keys:
  ed25519_private: |
    -----BEGIN OPENSSH PRIVATE KEY-----
    b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
    QyNTUxOQAAACBB6t2VuQBqewUe7dxJaqRHAyS9AR1ihN09cfIJnKs/zQAAAJjVOB5a1Tge
    WgAAAAtzc2gtZWQyNTUxOQAAACBB6t2VuQBqewUe7dxJaqRHAyS9AR1ihN09cfIJnKs/zQ
    AAAEDw32KC5v3cL1ZJg2cV5BX7X/nLe24JGCcdPtZRobKX3UHq3ZW5AGp7BR7t3ElqpEcD
    JL0BHWKE3T1x8gmcqz/NAAAAEWFkbWluQGV4YW1wbGUub3JnAQIDBA==
    -----END OPENSSH PRIVATE KEY-----
  ed25519_public: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEHq3ZW5AGp7BR7t3ElqpEcDJL0BHWKE3T1x8gmcqz/N admin@example.org
""",
        """\
#cloud-config
# Publish the host keys to the datasource, except RSA ones; keep ssh-keygen quiet.
ssh_quiet_keygen: true
ssh_publish_hostkeys:
  enabled: true
  blacklist: [rsa]
""",
    ),
)


def delete_host_keys(ctx: ModuleContext) -> None:
    for name in ctx.root.listdir(hostkeys.KEY_DIR):
        if name.startswith("ssh_host_") and "key" in name:
            ctx.root.remove(f"{hostkeys.KEY_DIR}/{name}")


def install_given_keys(ctx: ModuleContext, given: dict, problems: list[str]) -> None:
    """Write the ``ssh_keys`` pairs/certificates that pass their checks."""
    written_private = set()
    for name, value in given.items():
        where = f"ssh_keys.{name}"
        match = _KEY_NAME.match(str(name))
        if not match:
            problems.append(f"{where}: unknown key name (use <rsa|ecdsa|ed25519>_<private|public|certificate>)")
            continue
        keytype, part = match.groups()
        if keytype == "dsa":
            # as cloud-init 24.1+: a warning, and the rest is installed (OpenSSH 9.8 removed DSA altogether)
            ctx.warn(f"{where}: DSA host keys are no longer supported (cloud-init 24.1 dropped them); not written")
            continue
        path = hostkeys.key_path(keytype)
        text = str(value).strip() + "\n"
        if part == "private":
            if not _PRIVATE.match(text):
                problems.append(f"{where}: not a PEM/OpenSSH private key (BEGIN ... PRIVATE KEY block); not written")
                continue
            group = ctx.distro.ssh_keys_group if ctx.distro.group_exists(ctx.distro.ssh_keys_group or "") else None
            ctx.root.write(path, text, mode=0o640 if group else 0o600, owner=0, group=group)
            written_private.add(keytype)
            continue
        try:
            key = parse_key(text.strip())
        except SshKeyError as e:
            problems.append(f"{where}: not a valid SSH public key ({e}); not written")
            continue
        if part == "certificate":
            if "-cert-v01@openssh.com" not in key.keytype:
                problems.append(f"{where}: {key.keytype} is not a certificate type; not written")
                continue
            ctx.root.write(f"{path}-cert.pub", text, mode=0o644)
            try:
                sshd_config.apply(ctx.root, {"HostCertificate": f"{path}-cert.pub"})
            except sshd_config.SshdConfigError as e:
                problems.append(f"{where}: sshd rejected HostCertificate: {e}")
        else:
            ctx.root.write(f"{path}.pub", text, mode=0o644)
    for keytype in written_private:
        public = f"{hostkeys.key_path(keytype)}.pub"
        if f"{keytype}_public" in given:
            continue
        try:
            derived = ctx.root.run(["ssh-keygen", "-y", "-f", hostkeys.key_path(keytype)]).stdout.strip()
            ctx.root.write(public, f"{derived} root@localhost\n", mode=0o644)
        except (CommandError, RootError) as e:
            problems.append(f"ssh_keys.{keytype}_private: cannot derive the public key: {e}")


def generate_host_keys(ctx: ModuleContext, problems: list[str]) -> None:
    types = [str(t) for t in get_list(ctx.cfg, "ssh_genkeytypes")] if "ssh_genkeytypes" in ctx.cfg \
        else list(DEFAULT_KEY_TYPES)
    unknown = [t for t in types if t not in hostkeys.KNOWN_TYPES]
    if unknown:
        problems.append(f"ssh_genkeytypes: unknown key type(s) {', '.join(unknown)}")
        types = [t for t in types if t in hostkeys.KNOWN_TYPES]
    group = ctx.distro.ssh_keys_group
    started = time.monotonic()
    results = hostkeys.generate(ctx.root, types, parallel=True, defer_slow=True, key_group=group)
    if results:
        ready = [r.keytype for r in results if r.ok and not r.deferred]
        ctx.log.info("generated host keys %s in %.3fs", ", ".join(ready), time.monotonic() - started)
    for result in results:
        if result.deferred:
            ctx.log.info("the %s host key is still being generated; it is installed (and sshd reloaded) "
                         "when ready", result.keytype)
        elif result.ok:
            if group and ctx.distro.group_exists(group):
                ctx.root.chown(result.path, None, group)
                ctx.root.chmod(result.path, 0o640)
            if not as_bool(ctx.cfg.get("ssh_quiet_keygen"), False) and result.message:
                ctx.console(result.message.rstrip())
        elif result.skipped:
            ctx.log.info("%s", result.message)
        else:
            problems.append(f"ssh_genkeytypes: generating the {result.keytype} key failed: {result.message}")


def publish_host_keys(ctx: ModuleContext) -> None:
    settings = ctx.cfg.get("ssh_publish_hostkeys") or {}
    if not isinstance(settings, dict):
        settings = {}
    if not as_bool(settings.get("enabled"), True):
        return
    exclude = tuple(str(t) for t in (settings.get("blacklist") if "blacklist" in settings else PUBLISH_EXCLUDE) or ())
    keys = [[keytype, blob] for short, keytype, blob in hostkeys.public_host_keys(ctx.root, exclude)]
    ctx.instance_data.setdefault("ds", {})["published_host_keys"] = keys


def apply_authorized_keys(ctx: ModuleContext, problems: list[str]) -> None:
    lines: list[tuple[str, str]] = []
    if as_bool(ctx.cfg.get("allow_public_ssh_keys"), True) and ctx.datasource is not None:
        lines += [(str(k), f"datasource public key {i}") for i, k in enumerate(ctx.datasource.public_keys or [])]
    extra = ctx.cfg.get("ssh_authorized_keys")
    if extra is not None:
        extra = [extra] if isinstance(extra, str) else extra
        if not isinstance(extra, list):
            problems.append("ssh_authorized_keys: expected a list of keys")
            extra = []
        lines += [("" if k is None else str(k), f"ssh_authorized_keys[{i}]") for i, k in enumerate(extra)]
    keys = []
    for line, where in lines:
        try:
            keys.append(parse_key(line))
        except SshKeyError as e:
            problems.append(f"{where}: not a valid SSH public key ({e})")
    user = default_user_name(ctx.cfg, ctx.distro.default_user())
    if user and keys:
        if ctx.root.user_entry(user) is None:
            problems.append(f"ssh: default user {user} does not exist; its keys were not installed")
        else:
            install_authorized_keys(ctx.root, user, keys)
    if not keys:
        return
    if as_bool(ctx.cfg.get("disable_root"), True):
        options = str(ctx.cfg.get("disable_root_opts") or DISABLE_ROOT_OPTS)
        options = options.replace("$USER", user or "NONE").replace("$DISABLE_USER", "root")
    else:
        options = ""
    install_authorized_keys(ctx.root, "root", [parse_key(str(k), options=options) for k in keys])


def apply_password_auth(ctx: ModuleContext) -> bool:
    """``ssh_pwauth`` -> PasswordAuthentication; True when sshd's configuration changed."""
    try:
        value = sshd_config.password_auth_value(ctx.cfg.get("ssh_pwauth"))
    except ValueError as e:
        raise ModuleError(str(e)) from None
    if value is None:
        return False
    if not ctx.root.exists(sshd_config.MAIN_CONFIG):
        ctx.warn("ssh_pwauth: sshd is not configured here (no /etc/ssh/sshd_config); nothing changed")
        return False
    try:
        changed = sshd_config.apply(ctx.root, {"PasswordAuthentication": value})
    except sshd_config.SshdConfigError as e:
        raise ModuleError(f"ssh_pwauth: sshd rejected the change, previous configuration kept: {e}") from None
    if changed:
        ctx.distro.manage_service("try-reload", ctx.distro.ssh_service_name)
    return changed


def handle(ctx: ModuleContext) -> None:
    problems: list[str] = []
    if as_bool(ctx.cfg.get("ssh_deletekeys"), True):
        delete_host_keys(ctx)
    given = ctx.cfg.get("ssh_keys")
    if given:
        if isinstance(given, dict):
            install_given_keys(ctx, given, problems)
        else:
            problems.append("ssh_keys: expected a mapping such as {rsa_private: ..., rsa_public: ...}")
    else:
        generate_host_keys(ctx, problems)
    publish_host_keys(ctx)
    try:
        apply_authorized_keys(ctx, problems)
    except (SshKeyError, RootError, OSError) as e:
        problems.append(f"authorized keys: {e}")
    try:
        apply_password_auth(ctx)
    except ModuleError as e:
        problems.append(str(e))
    if problems:
        raise ModuleError("; ".join(problems))
