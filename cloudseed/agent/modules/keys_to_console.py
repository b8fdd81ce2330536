"""keys_to_console: print the SSH host key fingerprints and public keys on the console.

So that the first SSH connection can be verified from the provider's console log. Types listed
in ``ssh_fp_console_blacklist`` / ``ssh_key_console_blacklist`` (key type names such as
``ssh-dss``; the latter defaults to ``[ssh-dss]``) are left out; ``ssh: {emit_keys_to_console:
false}`` turns the module off. Fingerprints are computed here, no helper script is needed.
"""

from __future__ import annotations

import socket

from cloudseed.agent.hostkeys import public_host_keys
from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleSpec
from cloudseed.agent.sshkeys import fingerprint, key_bits
from cloudseed.core.values import as_bool, get_list

MODULE = ModuleSpec(
    name="keys_to_console", stage=STAGE_FINAL,
    title="Show the SSH host keys on the console",
    schema={"properties": {
        "ssh": {"type": "object", "properties": {"emit_keys_to_console": {"type": "boolean"}},
                "required": ["emit_keys_to_console"], "additionalProperties": False},
        "ssh_fp_console_blacklist": {"type": "array", "items": {"type": "string"}},
        "ssh_key_console_blacklist": {"type": "array", "items": {"type": "string"}},
    }},
    examples=(
        """\
#cloud-config
# Keep the SSH host keys and their fingerprints off the console.
ssh:
  emit_keys_to_console: false
""",
        """\
#cloud-config
# Show host keys and fingerprints on the console, except those of RSA keys.
ssh_key_console_blacklist: [ssh-rsa]
ssh_fp_console_blacklist: [ssh-rsa]
""",
    ),
)

_LABELS = {"ssh-rsa": "RSA", "ssh-dss": "DSA", "ssh-ed25519": "ED25519", "ecdsa-sha2-nistp256": "ECDSA",
           "ecdsa-sha2-nistp384": "ECDSA", "ecdsa-sha2-nistp521": "ECDSA"}


def console_lines(keys: list[tuple[str, str, str]], fp_exclude: set[str], key_exclude: set[str],
                  comment: str) -> list[str]:
    lines: list[str] = []
    shown = [(t, b) for _, t, b in keys if t not in fp_exclude]
    if shown:
        lines += ["#" * 61, "-----BEGIN SSH HOST KEY FINGERPRINTS-----"]
        lines += [f"{key_bits(t, b)} {fingerprint(b)} {comment} ({_LABELS.get(t, t.upper())})" for t, b in shown]
        lines += ["-----END SSH HOST KEY FINGERPRINTS-----", "#" * 61]
    listed = [(t, b) for _, t, b in keys if t not in key_exclude]
    if listed:
        lines.append("-----BEGIN SSH HOST KEY KEYS-----")
        lines += [f"{t} {b} {comment}" for t, b in listed]
        lines.append("-----END SSH HOST KEY KEYS-----")
    return lines


def handle(ctx: ModuleContext) -> None:
    ssh = ctx.cfg.get("ssh") if isinstance(ctx.cfg.get("ssh"), dict) else {}
    if not as_bool(ssh.get("emit_keys_to_console"), True):
        return
    fp_exclude = {str(t) for t in get_list(ctx.cfg, "ssh_fp_console_blacklist")}
    key_exclude = {str(t) for t in (get_list(ctx.cfg, "ssh_key_console_blacklist")
                                    if "ssh_key_console_blacklist" in ctx.cfg else ["ssh-dss"])}
    keys = public_host_keys(ctx.root)
    if not keys:
        ctx.log.info("no SSH host keys to show")
        return
    comment = f"root@{ctx.distro.read_hostname() or socket.gethostname()}"
    for line in console_lines(keys, fp_exclude, key_exclude, comment):
        ctx.console(line)
