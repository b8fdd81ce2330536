"""``cloudseed serve``: run the metadata server (every declared cloud's API, NoCloud; admin API)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

HELP = "run the metadata server (EC2/IMDSv2, OpenStack, GCE, Azure, OCI and more) for the instances in a registry"


def configure(parser: argparse.ArgumentParser) -> None:
    from cloudseed.provider.server.routes import CLOUD_APIS

    apis = ", ".join(sorted({"ec2", "openstack", "nocloud", *CLOUD_APIS}))
    parser.description = f"run the metadata server for the instances in a registry; APIs served: {apis}"
    parser.add_argument("--db", help="SQLite file (default /var/lib/cloudseed/server.db) or postgresql:// URL")
    parser.add_argument("--listen", action="append", metavar="HOST:PORT[=NETWORK]",
                        help="metadata listener; =NETWORK scopes source addresses to that network (repeatable)")
    parser.add_argument("--proxy-protocol-listen", action="append", metavar="HOST:PORT[=NETWORK]",
                        help="metadata listener behind a load balancer: every connection starts with a PROXY "
                             "protocol v1/v2 header naming the instance (repeatable); needs --proxy-protocol-from")
    parser.add_argument("--proxy-protocol-from", action="append", metavar="ADDRESS|CIDR",
                        help="load balancer allowed on the PROXY protocol listeners (repeatable); anyone else "
                             "is refused there")
    parser.add_argument("--admin-listen", metavar="HOST:PORT", help="admin API, /metrics and /health listener")
    parser.add_argument("--password-server-listen", action="append", metavar="HOST:PORT[=NETWORK]",
                        help="CloudStack/Exoscale password server listener (DomU_Request; usually port 8080; "
                             "repeatable; default none)")
    parser.add_argument("--oci-auth-listen", action="append", metavar="HOST:PORT",
                        help="OCI federation endpoint (POST /v1/x509: instance principal certificates for security "
                             "tokens; repeatable; default none)")
    parser.add_argument("--oci-auth-tls-listen", action="append", metavar="HOST:PORT",
                        help="the same in TLS, where the OCI SDKs look for it (HOST:443, reached as "
                             "auth.<region>.<realm domain>; certificate from the registry's CA: "
                             "'cloudseed instances identity-certificate --oci-auth'; repeatable; default none)")
    parser.add_argument("--admin-token-file", metavar="FILE", help="bearer token for the admin API")
    parser.add_argument("--proxy", action="append", metavar="ADDRESS|CIDR", dest="proxies",
                        help="trusted metadata proxy (repeatable); needs --proxy-secret-file")
    parser.add_argument("--proxy-secret-file", metavar="FILE", help="HMAC-SHA256 key proxies sign instance ids with")
    parser.add_argument("--imds-tokens", choices=("optional", "required"), help="require IMDSv2 for everyone")
    parser.add_argument("--token-hop-limit", type=int, help="IP TTL of IMDSv2 token replies (default 1)")
    parser.add_argument("--rate-limit", type=float, help="requests/s per source (0 disables; default 100)")
    parser.add_argument("--rate-burst", type=int, help="burst size per source (default 300)")
    parser.add_argument("--access-log", metavar="FILE", help="JSON access log: FILE, - for stderr, '' to disable")
    parser.add_argument("--region", help="EC2 region (default: availability zone minus its last letter)")
    parser.add_argument("--reuse-port", action="store_true", default=None,
                        help="SO_REUSEPORT, to run several server processes on one port")
    parser.add_argument("--processes", type=int, metavar="N",
                        help="server processes sharing the metadata ports (SO_REUSEPORT; default 1)")
    parser.add_argument("--config", metavar="FILE", help="YAML settings file; flags override it")


def run(args: argparse.Namespace) -> int:
    from cloudseed.provider.registry import RegistryError
    from cloudseed.provider.server.config import ConfigError, admin_token_from_environment, load_config
    from cloudseed.provider.server.service import serve

    logging.basicConfig(level=logging.DEBUG if getattr(args, "debug", False) else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    overrides = {
        "db": args.db, "listen": args.listen, "admin_listen": args.admin_listen,
        "password_server_listen": args.password_server_listen, "oci_auth_listen": args.oci_auth_listen,
        "oci_auth_tls_listen": args.oci_auth_tls_listen,
        "admin_token_file": args.admin_token_file, "proxies": args.proxies,
        "proxy_shared_secret_file": args.proxy_secret_file, "imds_tokens": args.imds_tokens,
        "token_hop_limit": args.token_hop_limit, "rate_limit": args.rate_limit, "rate_burst": args.rate_burst,
        "access_log": args.access_log, "region": args.region, "reuse_port": args.reuse_port,
        "processes": args.processes, "proxy_protocol_listen": args.proxy_protocol_listen,
        "proxy_protocol_from": args.proxy_protocol_from,
    }
    try:
        config = load_config(args.config, overrides)
    except ConfigError as error:
        print(f"cloudseed serve: {error}", file=sys.stderr)
        return 2
    if config.admin_token is None:
        config.admin_token = admin_token_from_environment()
    try:
        return asyncio.run(serve(config))
    except (OSError, RegistryError) as error:
        print(f"cloudseed serve: {error}", file=sys.stderr)
        return 1
