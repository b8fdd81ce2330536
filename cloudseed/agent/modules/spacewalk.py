"""spacewalk: register with a Spacewalk server (``spacewalk: {server, proxy, activation_key}``). RHEL family.

``rhn-setup`` (which provides ``rhnreg_ks``) is installed through the package manager when
missing. An instance already registered (``rhn-profile-sync`` succeeds) is left alone; otherwise
``rhnreg_ks --serverUrl https://SERVER/XMLRPC --profilename FQDN [--proxy P] --sslCACert CA
[--activationkey K]`` registers it. The activation key is a secret: it never appears in the log
or the status (``rhnreg_ks`` takes it only on its command line).
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._system_tools import reason as tool_reason
from cloudseed.core.root import CommandError

CA_CERT = "/usr/share/rhn/RHN-ORG-TRUSTED-SSL-CERT"
PACKAGE = "rhn-setup"

MODULE = ModuleSpec(
    name="spacewalk", stage=STAGE_CONFIG, activate_by=("spacewalk",), distros=("rhel", "fedora"),
    title="Register with a Spacewalk server",
    schema={"properties": {"spacewalk": {
        "type": "object", "additionalProperties": False,
        "description": "Registration with a Spacewalk (or Uyuni) server with rhnreg_ks.",
        "properties": {
            "server": {"type": "string", "description": "The Spacewalk server's host name; nothing is done "
                                                        "without it."},
            "proxy": {"type": "string", "description": "The proxy to reach the server through."},
            "activation_key": {"type": "string", "description": "The activation key to register with (secret: "
                                                                "never logged)."},
        },
    }}},
    examples=(
        """\
#cloud-config
spacewalk:
  server: spacewalk.example.com
  proxy: proxy.example.com:3128
  activation_key: 1-example-key
""",
    ),
)


def command(server: str, profile: str, proxy: str | None, key: str | None) -> list[str]:
    argv = ["rhnreg_ks", "--serverUrl", f"https://{server}/XMLRPC", "--profilename", profile]
    if proxy:
        argv += ["--proxy", proxy]
    argv += ["--sslCACert", CA_CERT]
    if key:
        argv += ["--activationkey", key]
    return argv


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.modules._system_tools import checked, install

    cfg = checked(ctx, "spacewalk", MODULE.schema)
    server = cfg.get("server")
    if not server:
        ctx.log.info("spacewalk: no server given; nothing to do")
        return
    if not ctx.root.which("rhnreg_ks"):
        install(ctx, "spacewalk", [PACKAGE], hint="rhnreg_ks comes with rhn-setup")
    if _registered(ctx):
        ctx.log.info("spacewalk: already registered (rhn-profile-sync works); not registering again")
        return
    key = cfg.get("activation_key") or None
    argv = command(server, _profile_name(ctx), cfg.get("proxy") or None, key)
    ctx.log.info("spacewalk: registering with %s%s", server, " using the activation key" if key else "")
    try:
        ctx.root.run(argv, input=b"", timeout=600)
    except CommandError as e:
        reason = tool_reason(e, [key or ""]).replace("[secret]", "[activation key]")
        raise ModuleError(f"spacewalk: rhnreg_ks failed to register with {server}: {reason}") from None


def _registered(ctx: ModuleContext) -> bool:
    if not ctx.root.which("rhn-profile-sync"):
        return False
    try:
        ctx.root.run(["rhn-profile-sync", "--verbose"], input=b"", timeout=300)
    except CommandError as e:
        if e.returncode == 1:
            return False
        raise ModuleError(f"spacewalk: rhn-profile-sync failed: {tool_reason(e)}") from None
    return True


def _profile_name(ctx: ModuleContext) -> str:
    from cloudseed.agent.hostnames import HostnameError, resolve

    current = ctx.root.read_text("/etc/hostname", default="").strip()
    try:
        return resolve(ctx.cfg, ctx.datasource, current).fqdn
    except HostnameError as e:
        raise ModuleError(f"spacewalk: no profile name: {e}") from None
