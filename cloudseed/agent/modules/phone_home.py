"""phone_home: POST this instance's id, hostname and host public keys to a URL when it is ready."""

from __future__ import annotations

import urllib.parse

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec

KEY_FILES = {
    "pub_key_rsa": "/etc/ssh/ssh_host_rsa_key.pub",
    "pub_key_ecdsa": "/etc/ssh/ssh_host_ecdsa_key.pub",
    "pub_key_ed25519": "/etc/ssh/ssh_host_ed25519_key.pub",
    "pub_key_dsa": "/etc/ssh/ssh_host_dsa_key.pub",
}
POSTABLE = ("pub_key_rsa", "pub_key_ecdsa", "pub_key_ed25519", "pub_key_dsa", "instance_id", "hostname", "fqdn")

MODULE = ModuleSpec(
    name="phone_home", stage=STAGE_FINAL, activate_by=("phone_home",),
    title="Post data to a URL when the instance is up",
    schema={"properties": {"phone_home": {
        "type": "object",
        "required": ["url"],
        "properties": {
            "url": {"type": "string", "format": "uri"},
            "post": {"oneOf": [{"type": "string", "enum": ["all"]},
                               {"type": "array", "items": {"type": "string", "enum": list(POSTABLE)}}]},
            "tries": {"type": "integer"},
        },
        "additionalProperties": False,
    }}},
    examples=(
        """\
#cloud-config
# POST every field when the instance is up; $INSTANCE_ID in the URL becomes the instance id.
phone_home:
  url: https://provisioning.example.net/ready/$INSTANCE_ID
  post: all
""",
        """\
#cloud-config
# POST a few fields, giving up after three attempts.
phone_home:
  url: http://192.0.2.10:8080/hosts/
  post: [instance_id, hostname, fqdn, pub_key_ed25519]
  tries: 3
""",
    ),
)


def collect(ctx: ModuleContext, wanted: list[str]) -> dict[str, str]:
    import socket

    values: dict[str, str] = {"instance_id": ctx.instance_id}
    hostname = ctx.root.read_text("/etc/hostname", default="").strip() or socket.gethostname()
    values["hostname"] = hostname.split(".")[0]
    values["fqdn"] = str(ctx.cfg.get("fqdn") or hostname)
    for key, path in KEY_FILES.items():
        if ctx.root.isfile(path):
            values[key] = ctx.root.read_text(path).strip()
    return {k: values.get(k, "N/A") for k in wanted}


def handle(ctx: ModuleContext) -> None:
    from cloudseed.core.http import FetchError, request

    settings = ctx.cfg.get("phone_home")
    if not isinstance(settings, dict) or not settings.get("url"):
        raise ModuleError("phone_home.url: missing")
    post = settings.get("post", "all")
    wanted = list(POSTABLE) if post == "all" else [k for k in (post or []) if k in POSTABLE]
    unknown = [k for k in (post if isinstance(post, list) else []) if k not in POSTABLE]
    if unknown:
        ctx.warn(f"phone_home.post: unknown keys {unknown} ignored")
    url = str(settings["url"])
    for variable in ("${INSTANCE_ID}", "$INSTANCE_ID"):
        url = url.replace(variable, ctx.instance_id)
    body = urllib.parse.urlencode(collect(ctx, wanted)).encode()
    try:
        tries = max(1, int(settings.get("tries", 10)))
    except (TypeError, ValueError):
        raise ModuleError("phone_home.tries: expected a number") from None
    last: Exception | None = None
    for _attempt in range(tries):
        try:
            request(url, method="POST", data=body, timeout=3.0,
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
            ctx.log.info("phoned home to %s", url)
            return
        except FetchError as e:
            last = e
    raise ModuleError(f"phone_home: giving up after {tries} tries: {last}")
