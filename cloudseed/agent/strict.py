"""Strict mode: fail closed. Any error (optionally any warning) makes the boot fail, visibly.

Off by default. Turned on by any of (none can turn off what another turned on):

- the image's configuration: ``strict: true`` or ``strict: {enabled: true, warnings: true,
  allow_ssh: false}``;
- the kernel command line: ``cloudseed.strict`` (errors) or ``cloudseed.strict=warnings``;
- the datasource's metadata: a key ``cloudseed-strict`` (``cloudseed_strict``) with ``true`` or
  ``warnings``, at the top of the metadata, in OpenStack's ``meta``, among EC2's instance
  ``tags`` or Azure's ``tagsList``: the platform asks for it per instance.

When a stage ends with an error (with ``warnings``: also a warning), ``fail``:

1. makes it the boot's error in the status (``status`` says ``error``, exit 1), even for a warning;
2. leaves ``/run/cloudseed/strict-failed`` holding the reason; the later stages run no module
   (each records why), so nothing builds on a half-provisioned machine;
3. stops and masks sshd for this boot (``systemctl mask --runtime --now``: ``ssh.service``,
   ``sshd.service``, ``ssh.socket``) unless ``allow_ssh: true``; a failure in the local or network
   stage comes before sshd starts (the network stage is ordered before it), a later one stops it;
4. says why on the console;
5. tells the platform: a ``FAIL`` event ``<stage>/strict`` to every reporting handler (the
   cloudseed metadata server, webhooks), and on Azure a ``NotReady`` health report with the
   reason (``ProvisioningFailed``) through the wire server.

Imported only when strict mode is on and a stage failed (``BootState.end``).
"""

from __future__ import annotations

import logging

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cloudseed.agent.boot_state import BootState

LOG = logging.getLogger("cloudseed.strict")
MARKER = "strict-failed"
SSH_UNITS = ("ssh.service", "sshd.service", "ssh.socket")
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
    """Strict mode's settings ({"warnings", "allow_ssh", "by"}), or None when it is off."""
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
    allow_ssh = isinstance(cfg, dict) and cfg.get("allow_ssh") is True
    return {"warnings": any(f["warnings"] for _, f in found), "allow_ssh": allow_ssh,
            "by": sorted({by for by, _ in found})}


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
    from cloudseed.agent.log import console
    from cloudseed.agent.status import STAGE_KEYS

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
    ssh = "allowed by strict.allow_ssh" if config["allow_ssh"] else _stop_ssh(state)
    console(f"cloudseed: ssh logins: {ssh}")
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
    from cloudseed.agent.log import console

    message = f"the {stage} stage ran no module: {why}"
    started = state.begin(stage)
    console(f"cloudseed: {message}")
    state.end(stage, started, [message], [], [])
    return 1


def _stop_ssh(state: BootState) -> str:
    if not state.root.is_live:
        return "left alone (not the running system)"
    if not state.root.which("systemctl"):
        return "left alone (no systemctl)"
    result = state.root.run(["systemctl", "mask", "--runtime", "--now", *SSH_UNITS], check=False, timeout=30)
    if result.returncode != 0:
        LOG.warning("stopping sshd: %s", result.stderr.strip())
    return "sshd stopped and masked for this boot (strict mode)"


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
