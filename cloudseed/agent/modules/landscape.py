"""landscape: register with Canonical's Landscape (``landscape: {client: {...}}``). Ubuntu only.

``landscape-client`` is installed through the package manager when ``landscape-config`` is
missing. The ``client`` settings, over the ones already in ``/etc/landscape/client.conf`` and
over the defaults (``url``, ``ping_url``, ``data_path``, ``log_level``), are written to that file
in its ``[client]`` section (0600: ``registration_key`` is a secret). Then, unless
``landscape-config --silent --is-registered`` says the machine is registered,
``landscape-config --silent --config /etc/landscape/client.conf`` registers it from that file, so
no secret is on a command line; ``/etc/default/landscape-client`` gets ``RUN=1``.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

CONFIG = "/etc/landscape/client.conf"
DEFAULTS_FILE = "/etc/default/landscape-client"
DEFAULTS = {"url": "https://landscape.canonical.com/message-system", "ping_url": "https://landscape.canonical.com/ping",
            "data_path": "/var/lib/landscape/client", "log_level": "info"}


def _text(what: str, **extra) -> dict:
    return {"type": "string", "description": what, **extra}


MODULE = ModuleSpec(
    name="landscape", stage=STAGE_FINAL, activate_by=("landscape",), distros=("ubuntu",),
    title="Register with Landscape",
    schema={"properties": {"landscape": {
        "type": "object", "required": ["client"], "additionalProperties": False,
        "description": "Landscape client settings.",
        "properties": {"client": {
            "type": "object", "additionalProperties": True,
            "description": "The ``[client]`` section of client.conf: these keys and any other the client reads.",
            "properties": {
                "url": _text("The Landscape server's message URL.", default=DEFAULTS["url"]),
                "ping_url": _text("The URL the client pings to start an exchange.", default=DEFAULTS["ping_url"]),
                "data_path": _text("Where the client keeps its data.", default=DEFAULTS["data_path"]),
                "log_level": _text("The client's log level.", default="info",
                                   enum=["debug", "info", "warning", "error", "critical"]),
                "computer_title": _text("The name this computer has in Landscape."),
                "account_name": _text("The Landscape account this computer belongs to."),
                "registration_key": _text("The account's registration key (secret: never logged; the file "
                                          "is 0600)."),
                "tags": _text("Comma-separated tags for this computer.", pattern="^[-_0-9a-zA-Z]+(,[-_0-9a-zA-Z]+)*$"),
                "http_proxy": _text("The HTTP proxy, when one is needed."),
                "https_proxy": _text("The HTTPS proxy, when one is needed."),
            },
        }},
    }}},
    examples=(
        """\
#cloud-config
landscape:
  client:
    url: https://landscape.example.com/message-system
    ping_url: http://landscape.example.com/ping
    data_path: /var/lib/landscape/client
    computer_title: web-01
    account_name: example-account
    registration_key: example-registration-key
    tags: web,production
""",
    ),
)


def read_client_section(text: str) -> dict[str, str]:
    """The ``key = value`` lines of the ``[client]`` section of an existing client.conf."""
    values: dict[str, str] = {}
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == "client"
            continue
        if inside and "=" in line:
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def render(values: dict[str, str]) -> str:
    return "[client]\n" + "".join(f"{name} = {value}\n" for name, value in values.items())


def merged(existing: str, client: dict) -> dict[str, str]:
    values = dict(DEFAULTS)
    values.update(read_client_section(existing))
    for name, value in client.items():
        if value is None:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if "\n" in text or "\n" in str(name):
            raise ModuleError(f"landscape.client.{name}: a value must be one line")
        values[str(name)] = text
    return values


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.modules._system_tools import checked, install

    cfg = checked(ctx, "landscape", MODULE.schema)
    client = cfg.get("client") or {}
    if not ctx.root.which("landscape-config"):
        install(ctx, "landscape", ["landscape-client"])
    values = merged(ctx.root.read_text(CONFIG, default=""), client)
    ctx.root.makedirs("/etc/landscape", mode=0o755)
    ctx.root.write(CONFIG, render(values), mode=0o600)
    ctx.root.write(DEFAULTS_FILE, "RUN=1\n", mode=0o644)
    ctx.log.info("landscape: wrote %s (%s)", CONFIG, ", ".join(sorted(values)))
    env = {"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    try:
        probe = ctx.root.run(["landscape-config", "--silent", "--is-registered"], input=b"", env=env,
                             check=False, timeout=120)
    except CommandError as e:
        raise ModuleError(f"landscape: landscape-config cannot run: {e}") from None
    if probe.returncode == 0:
        ctx.log.info("landscape: already registered; %s updated only", CONFIG)
        return
    try:
        ctx.root.run(["landscape-config", "--silent", "--config", CONFIG], input=b"", env=env, timeout=600)
    except CommandError as e:
        lines = [ln.strip() for ln in (e.stderr + "\n" + e.stdout).splitlines() if ln.strip()]
        reason = lines[-1][:200] if lines else f"exit status {e.returncode}"
        key = values.get("registration_key")
        raise ModuleError("landscape: landscape-config failed to register: "
                          + (reason.replace(key, "[registration key]") if key else reason)) from None
    ctx.log.info("landscape: registered with %s", values["url"])
