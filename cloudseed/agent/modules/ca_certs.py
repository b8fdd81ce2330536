"""ca_certs: trust extra CA certificates, optionally distrusting the distro's default ones.

``ca_certs: {trusted: [PEM...], remove_defaults: bool}`` (``ca-certs`` and ``remove-defaults``
are the deprecated spellings). Each certificate is checked to be a PEM ``CERTIFICATE`` block; a
bad one is reported with its index and left out. Debian: the bundle goes to
``/usr/share/ca-certificates/cloudseed-ca-certs.crt``, is listed in ``/etc/ca-certificates.conf``
and ``update-ca-certificates`` runs; ``remove_defaults`` marks every other listed certificate as
distrusted (``!name``) and rebuilds with ``--fresh``. RHEL: an anchor in
``/usr/share/pki/ca-trust-source/anchors`` and ``update-ca-trust extract``; ``remove_defaults``
removes the packaged ``ca-bundle.trust.p11-kit`` source.
"""

from __future__ import annotations

import re

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError
from cloudseed.core.values import as_bool, get_list

_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\s*\n([A-Za-z0-9+/=\s]+)\n-----END CERTIFICATE-----")

_SETTINGS = {"type": "object", "minProperties": 1, "properties": {
    "trusted": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "remove_defaults": {"type": "boolean"},
    "remove-defaults": {"type": "boolean", "deprecated": True, "deprecated_description": "Use remove_defaults."},
}, "additionalProperties": False}

MODULE = ModuleSpec(
    name="ca_certs", stage=STAGE_INIT, activate_by=("ca_certs", "ca-certs"),
    title="Add CA certificates",
    schema={"properties": {
        "ca_certs": _SETTINGS,
        "ca-certs": dict(_SETTINGS, deprecated=True, deprecated_description="Use ca_certs."),
    }},
    examples=(
        """\
#cloud-config
# Trust an internal CA beside the certificates the distribution ships.
ca_certs:
  trusted:
    - |
      -----BEGIN CERTIFICATE-----
      MIIBkTCCATegAwIBAgIUOfyIE0pkYu6B7GsZG7rBXqmHj84wCgYIKoZIzj0EAwIw
      HjEcMBoGA1UEAwwTRXhhbXBsZSBJbnRlcm5hbCBDQTAeFw0yNjExMjQyMDExMzZa
      Fw0zNjExMjEyMDExMzZaMB4xHDAaBgNVBAMME0V4YW1wbGUgSW50ZXJuYWwgQ0Ew
      WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASHGzxYe5pk3O10np5sg4Fl+S+aeBY5
      a7uD1vLEufANJYzPO27MaXr1OgfyTxIZ3XzbGcpTOyCy0prJmO6+A3joo1MwUTAd
      BgNVHQ4EFgQU7l9xmYGWiBtapAdNUKldZGk8d7swHwYDVR0jBBgwFoAU7l9xmYGW
      iBtapAdNUKldZGk8d7swDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBF
      AiEAvsunCfuz05bI2Kt6B10phmxBjnq0SGGj5mDn6BRu8P4CICQdvgi1JGPChYHn
      enLvPYLj6pj0TnCczJ00fbxqFVhB
      -----END CERTIFICATE-----
""",
        """\
#cloud-config
# Trust the internal CA only: every certificate the distribution ships is distrusted.
ca_certs:
  remove_defaults: true
  trusted:
    - |
      -----BEGIN CERTIFICATE-----
      MIIBkTCCATegAwIBAgIUOfyIE0pkYu6B7GsZG7rBXqmHj84wCgYIKoZIzj0EAwIw
      HjEcMBoGA1UEAwwTRXhhbXBsZSBJbnRlcm5hbCBDQTAeFw0yNjExMjQyMDExMzZa
      Fw0zNjExMjEyMDExMzZaMB4xHDAaBgNVBAMME0V4YW1wbGUgSW50ZXJuYWwgQ0Ew
      WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASHGzxYe5pk3O10np5sg4Fl+S+aeBY5
      a7uD1vLEufANJYzPO27MaXr1OgfyTxIZ3XzbGcpTOyCy0prJmO6+A3joo1MwUTAd
      BgNVHQ4EFgQU7l9xmYGWiBtapAdNUKldZGk8d7swHwYDVR0jBBgwFoAU7l9xmYGW
      iBtapAdNUKldZGk8d7swDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBF
      AiEAvsunCfuz05bI2Kt6B10phmxBjnq0SGGj5mDn6BRu8P4CICQdvgi1JGPChYHn
      enLvPYLj6pj0TnCczJ00fbxqFVhB
      -----END CERTIFICATE-----
""",
    ),
)


def check_certificates(items: list, problems: list[str]) -> list[str]:
    good = []
    for index, item in enumerate(items):
        text = str(item).strip()
        blocks = _PEM.findall(text) if isinstance(item, str) else []
        if not blocks or text.count("-----BEGIN") != len(blocks):
            problems.append(f"ca_certs.trusted[{index}]: not a PEM certificate (-----BEGIN CERTIFICATE----- block); "
                            "left out")
            continue
        good.append(text)
    return good


def _distrust_listed(config_text: str, keep: str) -> str:
    lines = []
    for line in config_text.splitlines():
        entry = line.strip()
        if entry and not entry.startswith(("#", "!")) and entry != keep:
            lines.append("!" + entry)
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def handle(ctx: ModuleContext) -> None:
    if "ca-certs" in ctx.cfg and "ca_certs" not in ctx.cfg:
        ctx.warn("ca-certs is deprecated; use ca_certs")
    settings = ctx.cfg.get("ca_certs", ctx.cfg.get("ca-certs"))
    if not isinstance(settings, dict):
        raise ModuleError("ca_certs: expected a mapping with 'trusted' and/or 'remove_defaults'")
    problems: list[str] = []
    layout = ctx.distro.ca_certs_layout()
    remove = as_bool(settings.get("remove_defaults", settings.get("remove-defaults")), False)
    certs = check_certificates(get_list(settings, "trusted"), problems)
    bundle = f"{layout['cert_dir']}/{layout['cert_file']}"
    if certs:
        ctx.root.write(bundle, "\n".join(certs) + "\n", mode=0o644)
    config = layout.get("config")
    if config:
        text = ctx.root.read_text(config, default="")
        entries = [line for line in text.splitlines() if line.strip() != layout["cert_file"]]
        if certs:
            entries.append(layout["cert_file"])
        new_text = "\n".join(entries) + "\n" if entries else ""
        if remove:
            new_text = _distrust_listed(new_text, layout["cert_file"])
        if new_text != text:
            ctx.root.write(config, new_text, mode=0o644, keep_mode=True)
    elif remove:
        for default_bundle in layout.get("default_bundles", []):
            ctx.root.remove(default_bundle)
    command = list(layout["update"]) + (["--fresh"] if remove and config else [])
    if ctx.root.which(command[0]):
        try:
            ctx.root.run(command, timeout=120)
        except CommandError as e:
            problems.append(f"ca_certs: {e}")
    else:
        ctx.warn(f"ca_certs: {command[0]} is not installed; the certificate store was not rebuilt")
    ctx.log.info("added %d CA certificate(s)%s", len(certs), ", defaults distrusted" if remove else "")
    if problems:
        raise ModuleError("; ".join(problems))
