"""sshd settings (``PasswordAuthentication``, ``HostCertificate``...) written the way this sshd reads them.

When ``/etc/ssh/sshd_config`` includes ``/etc/ssh/sshd_config.d/*.conf`` the settings go to our
drop-in ``50-cloudseed.conf`` (the main file is left untouched); otherwise the main file is
edited in place: an existing line is changed, a missing one is added before the first ``Match``
block (so it applies globally). When the target has ``sshd``, the result is checked with
``sshd -t`` and the previous file is put back if sshd rejects it.
"""

from __future__ import annotations

import logging

from cloudseed.core.root import CommandError, TargetRoot

LOG = logging.getLogger("cloudseed.sshd")

MAIN_CONFIG = "/etc/ssh/sshd_config"
DROP_IN_DIR = "/etc/ssh/sshd_config.d"
DROP_IN = f"{DROP_IN_DIR}/50-cloudseed.conf"

# sshd -t failures that say nothing about the configuration itself
_NOT_CONFIG_ERRORS = ("no hostkeys available", "missing privilege separation directory")


class SshdConfigError(Exception):
    """sshd rejected the configuration we would have installed (it was not installed)."""


def uses_drop_in(root: TargetRoot) -> bool:
    for line in root.read_text(MAIN_CONFIG, default="").splitlines():
        fields = line.strip().split()
        if len(fields) >= 2 and fields[0].lower() == "include" and \
                any(item.startswith(f"{DROP_IN_DIR}/") for item in fields[1:]):
            return True
    return False


def update_lines(text: str, updates: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with ``updates`` applied (global section only) and the keys that changed."""
    lines = text.splitlines()
    wanted = {key.lower(): key for key in updates}
    changed: list[str] = []
    found: set[str] = set()
    match_at = None
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, _, value = stripped.replace("=", " ", 1).partition(" ")
        lower = key.lower()
        if lower == "match":
            match_at = index
            break
        if lower in wanted:
            name = wanted[lower]
            found.add(name)
            if value.strip() != updates[name]:
                lines[index] = f"{name} {updates[name]}"
                changed.append(name)
    missing = [f"{name} {value}" for name, value in updates.items() if name not in found]
    changed += [name for name in updates if name not in found]
    if missing:
        if match_at is None:
            lines += missing
        else:
            lines[match_at:match_at] = missing + [""]
    return "\n".join(lines) + "\n", changed


def validate(root: TargetRoot) -> None:
    """Run ``sshd -t`` in the target when it has sshd; SshdConfigError with its complaint."""
    sshd = root.which("sshd")
    if sshd is None:
        return
    try:
        root.run([sshd, "-t"], timeout=30)
    except CommandError as e:
        message = (e.stderr or e.stdout).strip()
        if any(skip in message.lower() for skip in _NOT_CONFIG_ERRORS):
            return
        raise SshdConfigError(message.splitlines()[-1] if message else str(e)) from None


def apply(root: TargetRoot, updates: dict[str, str]) -> bool:
    """Apply ``updates``; True when a file changed. The old file is restored if sshd rejects it."""
    target = DROP_IN if uses_drop_in(root) else MAIN_CONFIG
    existed = root.exists(target)
    before = root.read_text(target, default="")
    after, changed = update_lines(before, updates)
    if not changed:
        return False
    mode = 0o600 if target == DROP_IN else 0o644
    root.write(target, after, mode=mode, keep_mode=existed)
    try:
        validate(root)
    except SshdConfigError:
        if existed:
            root.write(target, before, mode=mode, keep_mode=True)
        else:
            root.remove(target)
        raise
    LOG.info("%s: set %s", target, ", ".join(changed))
    return True


def password_auth_value(value: object) -> str | None:
    """``ssh_pwauth`` as 'yes'/'no', or None for 'leave it unchanged'."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return "yes"
    if text in ("false", "no", "off", "0"):
        return "no"
    if text == "unchanged":
        return None
    raise ValueError(f"ssh_pwauth: {value!r} is not true, false or 'unchanged'")
