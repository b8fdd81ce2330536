"""Strict mode: fail closed. Any error (optionally any warning) makes the boot fail, visibly.

Off by default. Turned on by any of (none can turn off what another turned on):

- the image's configuration: ``strict: true`` or ``strict: {enabled: true, warnings: true,
  allow_root_login: false, allow_ssh: false}``;
- the kernel command line: ``cloudseed.strict`` (errors) or ``cloudseed.strict=warnings``;
- the datasource's metadata: a key ``cloudseed-strict`` (``cloudseed_strict``) with ``true`` or
  ``warnings``, at the top of the metadata, in OpenStack's ``meta``, among EC2's instance
  ``tags`` or Azure's ``tagsList``: the platform asks for it per instance.

What logins remain is the image's choice alone (``allow_*`` are read from its configuration,
never from user-data or the platform's metadata).

When a stage ends with an error (with ``warnings``: also a warning), ``fail``:

1. makes it the boot's error in the status (``status`` says ``error``, exit 1), even for a warning;
2. leaves ``/run/cloudseed/strict-failed`` holding the reason; the later stages run no module
   (each records why), so nothing builds on a half-provisioned machine;
3. refuses logins (``refuse_logins``), already when a module fails, before its stage ends:
   ``/run/nologin`` holds the reason, so PAM's ``pam_nologin`` (in the sshd and login stacks of
   Debian and the RHEL family) refuses every user but root, with that text; and sshd is masked
   and stopped for this boot (``systemctl mask --runtime``, ``stop``: ``ssh.service``,
   ``sshd.service``, ``ssh.socket``), which refuses root too. ``allow_root_login: true`` keeps
   sshd for root's key (the operator's way in to see what failed); ``allow_ssh: true`` leaves
   logins alone. ``systemd-user-sessions.service``, which removes ``/run/nologin`` when it
   starts, is masked for the boot (never stopped: its stop writes a nologin of its own): a first
   boot's network stage comes before it, a reboot's may not (docs/lab.md), and the file is
   written again after the mask and at each later stage (the boot's tmpfiles may replace it
   after the local stage);
4. says why on the console;
5. tells the platform: a ``FAIL`` event ``<stage>/strict`` to every reporting handler (the
   cloudseed metadata server, webhooks), and on Azure a ``NotReady`` health report with the
   reason (``ProvisioningFailed``) through the wire server.

Imported only when strict mode is on and a module or a stage failed.
"""

from __future__ import annotations

import logging

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cloudseed.agent.boot.boot_state import BootState

LOG = logging.getLogger("cloudseed.strict")
MARKER = "strict-failed"
SSH_UNITS = ("ssh.service", "sshd.service", "ssh.socket")
NOLOGIN = "/run/nologin"  # pam_nologin's first choice (then /etc/nologin); /run is this boot's
USER_SESSIONS = "systemd-user-sessions.service"  # removes /run/nologin when it starts
MASKED = "strict-masked"  # /run/cloudseed/...: the units masked so far this boot, one a line
METADATA_KEYS = ("cloudseed-strict", "cloudseed_strict")
STAGE_EVENTS = {"local": "init-local", "network": "init-network", "config": "modules-config",
                "final": "modules-final"}


def _words(value: Any) -> dict | None:
    """A setting's value as {"warnings": bool}, or None when it is off."""
    if value is True or (isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "errors")):
        return {"warnings": False}
    if isinstance(value, str) and value.strip().lower() == "warnings":
        return {"warnings": True}
    return None


def settings(system_cfg: dict, cmdline: str, datasource: Any) -> dict | None:
    """Strict mode's settings ({"warnings", "allow_ssh", "allow_root_login", "by"}), or None when it is off."""
    found: list[tuple[str, dict]] = []
    cfg = system_cfg.get("strict")
    if isinstance(cfg, dict) and cfg.get("enabled", True) is True:
        found.append(("configuration", {"warnings": cfg.get("warnings") is True}))
    elif _words(cfg):
        found.append(("configuration", _words(cfg) or {}))
    for token in cmdline.split():
        if token == "cloudseed.strict":
            found.append(("kernel command line", {"warnings": False}))
        elif token.startswith("cloudseed.strict=") and _words(token.split("=", 1)[1]):
            found.append(("kernel command line", _words(token.split("=", 1)[1]) or {}))
    for place in _metadata_places(datasource):
        for key in METADATA_KEYS:
            if _words(place.get(key)):
                found.append(("datasource metadata", _words(place.get(key)) or {}))
    if not found:
        return None
    allowed = cfg if isinstance(cfg, dict) else {}
    return {"warnings": any(f["warnings"] for _, f in found), "allow_ssh": allowed.get("allow_ssh") is True,
            "allow_root_login": allowed.get("allow_root_login") is True, "by": sorted({by for by, _ in found})}


def _metadata_places(datasource: Any) -> list[dict]:
    """The mappings of a datasource's metadata where a platform may name the setting."""
    metadata = getattr(datasource, "metadata", None)
    metadata = metadata if isinstance(metadata, dict) else {}
    tags = metadata.get("tags")
    places = [metadata, metadata.get("meta"), tags, tags.get("instance") if isinstance(tags, dict) else None]
    raw = getattr(datasource, "raw", None)
    compute = ((raw.get("imds") or {}).get("compute") if isinstance(raw, dict) and isinstance(raw.get("imds"), dict)
               else None)
    if isinstance(compute, dict) and isinstance(compute.get("tagsList"), list):  # Azure IMDS
        places.append({str(t.get("name")): t.get("value") for t in compute["tagsList"] if isinstance(t, dict)})
    return [p for p in places if isinstance(p, dict)]


def failed(state: BootState) -> str:
    """The reason an earlier stage of this boot failed under strict mode ("" when none did)."""
    inner = state.paths.run(MARKER)
    return state.root.read_text(inner).strip() if state.root.exists(inner) else ""


def fail(state: BootState, stage: str, errors: list[str], warnings: list[str], config: dict) -> str:
    """Fail the boot at the end of ``stage`` (see the module docstring); returns the reason."""
    from cloudseed.agent.state.log import console
    from cloudseed.agent.state.status import STAGE_KEYS

    problems = errors or warnings
    reason = (f"strict mode ({', '.join(config['by'])}): the {stage} stage ended with "
              f"{len(problems)} {'error' if errors else 'warning'}(s): " + "; ".join(problems[:3]))[:1000]
    record = state.status.v1[STAGE_KEYS[stage]]
    record["errors"] = [*record.get("errors", []), reason]
    record["strict"] = reason
    state.status.save()
    state.status.write_result()
    state.root.write(state.paths.run(MARKER), reason + "\n", mode=0o644)
    console(f"cloudseed: STRICT MODE: provisioning FAILED in the {stage} stage")
    for problem in problems[:10]:
        console(f"cloudseed:   {problem}")
    console(f"cloudseed: logins: {refuse_logins(state, reason, config)}")
    if state.reporter is not None:
        name = f"{STAGE_EVENTS[stage]}/strict"
        state.reporter.start(name, "strict mode: the boot fails closed")
        state.reporter.finish(name, reason, "FAIL", 0.0)
    if state.datasource is not None and state.datasource.name == "Azure":
        _azure_not_ready(state, reason)
    LOG.error("%s", reason)
    return reason


def skip_stage(state: BootState, stage: str, why: str) -> int:
    """A later stage after a strict failure: no module runs; the status says why."""
    from cloudseed.agent.state.log import console

    message = f"the {stage} stage ran no module: {why}"
    started = state.begin(stage)
    if not _allowed(state.system_cfg).get("allow_ssh"):
        # again: the boot's tmpfiles may have written its own /run/nologin after the local stage
        _write_nologin(state, failed(state))
    console(f"cloudseed: {message}")
    state.end(stage, started, [message], [], [])
    return 1


def module_failed(state: BootState, stage: str, module: str, reason: str) -> None:
    """A module failed: under strict mode, logins are refused now, not when the stage ends."""
    config = settings(state.system_cfg, state.cmdline, state.datasource)
    if config is None or failed(state):
        return
    why = (f"strict mode ({', '.join(config['by'])}): the {stage} stage's module {module} failed: {reason}")[:1000]
    LOG.error("%s; logins: %s", why, refuse_logins(state, why, config))


def refuse_logins(state: BootState, reason: str, config: dict) -> str:
    """Refuse logins as the image's strict settings say (the module docstring); what became of them."""
    if config["allow_ssh"]:
        return "left alone (strict.allow_ssh)"
    _write_nologin(state, reason)
    users = "user logins refused (/run/nologin)"
    root = ("root's key logins allowed (strict.allow_root_login)" if config["allow_root_login"]
            else "sshd stopped and masked for this boot (strict mode)")
    if not state.root.is_live:
        return f"{users}; services left alone (not the running system)"
    if not state.root.which("systemctl"):
        return f"{users}; services left alone (no systemctl)"
    done_file = state.paths.run(MASKED)
    done = set(state.root.read_text(done_file, default="").split())
    # systemd-user-sessions.service: masked, never stopped (its stop writes a nologin of its own);
    # whether it ran already depends on the boot (a reboot's sshd and logins may go early)
    todo = [u for u in ([] if config["allow_root_login"] else list(SSH_UNITS)) + [USER_SESSIONS] if u not in done]
    if todo:
        _systemctl(state, "mask", "--runtime", *todo)
        running = [u for u in todo if u in SSH_UNITS]
        if running:
            _systemctl(state, "stop", *running)
        state.root.write(done_file, "".join(f"{u}\n" for u in sorted(done | set(todo))), mode=0o644)
        _write_nologin(state, reason)  # again: a systemd-user-sessions.service starting meanwhile removed it
    return f"{users}; {root}"


def _systemctl(state: BootState, *argv: str) -> None:
    result = state.root.run(["systemctl", *argv], check=False, timeout=30)
    if result.returncode != 0:
        LOG.warning("strict mode: systemctl %s: %s", " ".join(argv), result.stderr.strip())


def _allowed(system_cfg: dict) -> dict:
    cfg = system_cfg.get("strict")
    return cfg if isinstance(cfg, dict) else {}


def _write_nologin(state: BootState, reason: str) -> None:
    """``/run/nologin`` with the reason: what pam_nologin shows each user it refuses."""
    text = (f"This instance failed to provision: {reason}\n"
            "Logins are refused (cloudseed strict mode); the boot's status says more.\n")
    if state.root.read_text(NOLOGIN, default="") != text:
        state.root.write(NOLOGIN, text, mode=0o644)


def _azure_not_ready(state: BootState, reason: str) -> None:
    from cloudseed.agent.datasources._azure_wireserver import (
        WELL_KNOWN,
        WireServerError,
        endpoint_from_leases,
        report_health,
    )

    section = ((state.system_cfg.get("datasource") or {}).get("Azure") or {})
    endpoint = str(section.get("wireserver") or endpoint_from_leases() or WELL_KNOWN)
    try:
        report_health(endpoint, "NotReady", "ProvisioningFailed", reason, deadline=15.0)
    except (WireServerError, ValueError) as e:
        LOG.error("Azure: reporting the failure failed: %s", e)
