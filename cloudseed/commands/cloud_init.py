"""``cloud-init``'s command line, mapped onto cloudseed's verbs (``/usr/bin/cloud-init``: ``main``).

The verbs, options and exit codes people script against: ``status [--wait] [--long] [--format]``,
``query``, ``schema``, ``clean [--logs] [--seed] [--reboot] [--machine-id]``, ``single``,
``init [--local]``, ``modules --mode`` (these three with 24.x's ``--file``), ``analyze show|blame|dump|boot``,
``collect-logs``, ``devel net-convert``, ``devel make-mime``, ``devel hotplug-hook``, ``features``, ``--version``.
Each is turned into the cloudseed command that does it (``status`` is ``cloudseed status``,
``devel net-convert`` is ``cloudseed net render``...), so the behaviour is cloudseed's. One
extension: a global ``--root DIR`` (as every cloudseed command has) for offline roots and tests.
``cloudseed cloud-init ARGS...`` runs the same thing from the ``cloudseed`` command.
"""

from __future__ import annotations

import argparse
import os
import sys

HELP = "cloud-init's command line (status, query, schema, clean, devel net-convert...) on cloudseed"

CLOUD_INIT_LEVEL = "23.4"  # the cloud-init whose command line this follows (status exit 2: degraded)
NET_KINDS = {"yaml": "auto", "network_data.json": "openstack"}
RHEL_LIKE = ("rhel", "centos", "fedora", "rocky", "almalinux", "alma", "cloudlinux", "eurolinux", "miraclelinux",
             "openeuler", "virtuozzo", "amazon", "ol", "opensuse", "sles", "suse")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="cloud-init's arguments")


def run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if args.root != "/" and "--root" not in argv:
        argv = ["--root", args.root, *argv]
    return cloud_init(argv, prog="cloud-init")


def main() -> int:
    """``/usr/bin/cloud-init``."""
    return cloud_init(sys.argv[1:], prog=os.path.basename(sys.argv[0]) or "cloud-init")


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="cloud-init's command line, answered by cloudseed")
    p.add_argument("--version", "-v", action="store_true", help="show the version and exit")
    # removed from the top level in cloud-init 24.x (an option of init, modules and single since)
    p.add_argument("--file", "-f", action="append", dest="top_files", default=[], help=argparse.SUPPRESS)
    p.add_argument("--debug", "-d", action="store_true", help="debug messages on stderr")
    p.add_argument("--force", action="store_true", help="accepted for compatibility; no effect")
    p.add_argument("--root", default="/", metavar="DIR", help="(cloudseed) work on the root DIR")
    sub = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")

    s = sub.add_parser("init", help="the local (--local) or the network stage")
    s.add_argument("--local", "-l", action="store_true")
    _file_arg(s)
    s = sub.add_parser("modules", help="the config or final stage's modules")
    s.add_argument("--mode", "-m", default="config", choices=("init", "config", "final"),
                   help=f"`init` is {MODE_INIT_DEPRECATED}")
    _file_arg(s)
    s = sub.add_parser("single", help="run a single module")
    _file_arg(s)
    s.add_argument("--name", "-n", required=True)
    s.add_argument("--frequency", choices=("instance", "always", "once"))
    s.add_argument("--report", action="store_true")
    s.add_argument("module_args", nargs="*")
    s = sub.add_parser("query", help="query instance data")
    s.add_argument("varname", nargs="?")
    s.add_argument("--instance-data", "-i")
    s.add_argument("--list-keys", "-l", action="store_true")
    s.add_argument("--user-data", "-u")
    s.add_argument("--vendor-data", "-v")
    s.add_argument("--all", "-a", action="store_true")
    s.add_argument("--format", "-f")
    s.add_argument("--debug", "-d", action="store_true", dest="sub_debug")
    sub.add_parser("features", help="list the supported features")
    s = sub.add_parser("analyze", help="where the boot's time went")
    s.add_argument("action", choices=("show", "blame", "dump", "boot"))
    s.add_argument("--infile", "-i", help="accepted for compatibility (the status record is read)")
    s.add_argument("--outfile", "-o", default="-")
    s = sub.add_parser("devel", help="development tools")
    dev = s.add_subparsers(dest="devel", metavar="TOOL")
    n = dev.add_parser("net-convert", help="render a network config")
    n.add_argument("--network-data", "-p", required=True)
    n.add_argument("--kind", "-k", required=True, choices=("eni", "network_data.json", "yaml", "azure-imds",
                                                            "vmware-imc"))
    n.add_argument("--directory", "-d", required=True)
    n.add_argument("--distro", "-D", default="ubuntu")
    n.add_argument("--mac", "-m", action="append", default=[], metavar="NAME,MAC")
    n.add_argument("--debug", action="store_true", dest="sub_debug")
    n.add_argument("--output-kind", "-O", required=True,
                   choices=("eni", "netplan", "networkd", "sysconfig", "network-manager"))
    m = dev.add_parser("make-mime", help="build MIME multipart user-data")
    m.add_argument("--attach", "-a", dest="attach", action="append", default=[])
    m.add_argument("--list-types", "-l", action="store_true")
    m.add_argument("--force", "-f", action="store_true", dest="mime_force")
    d = dev.add_parser("schema", help="validate cloud-config")
    _schema_args(d)
    h = dev.add_parser("hotplug-hook", help="hotplug events (see cloudseed hotplug-hook)")
    h.add_argument("rest", nargs=argparse.REMAINDER)
    s = sub.add_parser("collect-logs", help="collect logs into a tarball")
    s.add_argument("--tarfile", "-t", default="cloud-init.tar.gz")
    s.add_argument("--include-userdata", "-u", action="store_true")
    s.add_argument("--redact-sensitive", "-r", "--redact", dest="redact", action="store_true")
    s.add_argument("--verbose", "-v", action="count", default=0)
    s = sub.add_parser("clean", help="forget this instance")
    s.add_argument("--logs", "-l", action="store_true")
    s.add_argument("--machine-id", action="store_true")
    s.add_argument("--reboot", "-r", action="store_true")
    s.add_argument("--seed", "-s", action="store_true")
    s.add_argument("--configs", "-c", nargs="+", default=[],
                   choices=("all", "ssh_config", "network", "datasource", "fstab"))
    s = sub.add_parser("status", help="the boot status (exit 0 done, 1 error, 2 degraded)")
    s.add_argument("--format", default="tabular", choices=("json", "tabular", "yaml"))
    s.add_argument("--long", "-l", action="store_true")
    s.add_argument("--wait", "-w", action="store_true")
    s = sub.add_parser("schema", help="validate cloud-config")
    _schema_args(s)
    return p


# cloud-init 24.1's wording (the release it will go in: five after)
MODE_INIT_DEPRECATED = "deprecated in 24.1 and scheduled to be removed in 29.1. Use `cloud-init init` instead."


def _file_arg(s: argparse.ArgumentParser) -> None:
    s.add_argument("--file", "-f", action="append", dest="files", default=[], metavar="FILES",
                   help="additional YAML configuration, over every other source, for this run (repeatable)")


def _files(args) -> list[str]:
    return [arg for path in args.files for arg in ("--file", path)]


def _schema_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("--config-file", "-c")
    s.add_argument("--schema-type", "-t", choices=("cloud-config", "network-config"), default="cloud-config")
    s.add_argument("--instance-data", "-i")
    s.add_argument("--system", action="store_true")
    s.add_argument("--docs", "-d", nargs="*")
    s.add_argument("--annotate", action="store_true")


def cloud_init(argv: list[str], prog: str = "cloud-init") -> int:
    """Parse cloud-init's arguments and run the cloudseed command that does it: the exit status."""
    p = parser(prog)
    args = p.parse_args(argv)
    if args.version:
        from cloudseed import __version__

        print(f"{prog} {CLOUD_INIT_LEVEL} (cloudseed {__version__})")
        return 0
    if args.subcommand is None:
        p.print_usage(sys.stderr)
        print(f"{prog}: error: the following arguments are required: subcommand", file=sys.stderr)
        return 2
    if args.top_files:
        print(f"{prog}: --file before the subcommand was removed in cloud-init 24.x (it is an option of init, "
              f"modules and single); put the settings in /etc/cloud/cloud.cfg.d/", file=sys.stderr)
        return 2
    base = ["--root", args.root] + (["--debug"] if args.debug else [])
    handler = _HANDLERS[args.subcommand]
    return handler(args, base, prog)


def _cli(argv: list[str]) -> int:
    from cloudseed.cli import main as cli_main

    return cli_main(argv)


def _init(args, base, prog) -> int:
    return _cli([*base, "init", *(["--local"] if args.local else []), *_files(args)])


def _modules(args, base, prog) -> int:
    if args.mode == "init":
        print(f"`--mode init` is {MODE_INIT_DEPRECATED}", file=sys.stderr)
        print(f"{prog} modules --mode init: cloudseed runs the init modules in the network stage "
              f"('{prog} init'); use '{prog} single --name MODULE' for one of them", file=sys.stderr)
        return 1
    return _cli([*base, "modules", "--mode", args.mode, *_files(args)])


def _single(args, base, prog) -> int:
    return _cli([*base, "single", "--name", args.name, *(["--frequency", args.frequency] if args.frequency else []),
                 *_files(args)])


def _query(args, base, prog) -> int:
    argv = [*base, "query"]
    if args.instance_data:
        argv += ["--instance-data", args.instance_data]
    if args.list_keys:
        argv.append("--list-keys")
    if args.all:
        argv.append("--all")
    if args.format:
        argv += ["--format", args.format]
    for option, value in (("--user-data", args.user_data), ("--vendor-data", args.vendor_data)):
        if value:
            argv += [option, value]
    if args.varname:
        argv.append(args.varname)
    return _cli(argv)


def _features(args, base, prog) -> int:
    return _cli([*base, "features"])


def _schema(args, base, prog) -> int:
    if args.docs is not None:
        return _cli([*base, "schema", "--modules-table"])
    if args.config_file:
        return _cli([*base, "schema", "--config-file", args.config_file, "--schema-type", args.schema_type,
                     *(["--instance-data", args.instance_data] if args.instance_data else []),
                     *(["--annotate"] if args.annotate else [])])
    if args.system:
        return _cli([*base, "schema", "--system", *(["--annotate"] if args.annotate else [])])
    print(f"{prog} schema: expected one of --config-file, --system or --docs", file=sys.stderr)
    return 1


def _status(args, base, prog) -> int:
    return _cli([*base, "status", "--format", args.format, *(["--long"] if args.long else []),
                 *(["--wait"] if args.wait else [])])


def _clean(args, base, prog) -> int:
    from cloudseed.agent.state import compat_paths
    from cloudseed.core.root import TargetRoot

    code = _cli([*base, "clean", *(["--logs"] if args.logs else []), *(["--seed"] if args.seed else []),
                 *(["--configs", *args.configs] if args.configs else [])])
    root = TargetRoot(args.root)
    compat_paths.remove(root)
    root.remove_tree("/var/lib/cloud/sem")  # cloud-init-per's once/always semaphores, as cloud-init clean
    if args.machine_id:
        # systemd makes a new id at the next boot from "uninitialized"; without systemd: no file
        if root.exists("/usr/lib/systemd/systemd") or root.exists("/lib/systemd/systemd"):
            root.write("/etc/machine-id", "uninitialized\n", mode=0o444)
        else:
            root.remove("/etc/machine-id")
    if args.reboot and code == 0:
        if not root.is_live:
            print(f"{prog} clean: --reboot ignored for an offline root")
            return 0
        return root.run(["shutdown", "-r", "now"], check=False).returncode
    return code


def _collect_logs(args, base, prog) -> int:
    return _cli([*base, "collect-logs", "--tarfile", args.tarfile, *(["--include-userdata"] if args.include_userdata
                                                                     else []),
                 *(["--redact"] if args.redact else []), *(["-v"] * args.verbose)])


def _analyze(args, base, prog) -> int:
    if args.action in ("show", "blame"):
        return _cli([*base, "analyze", args.action])
    from cloudseed.commands._analyze_compat import boot, dump
    from cloudseed.core.root import TargetRoot

    return (dump if args.action == "dump" else boot)(TargetRoot(args.root), args.outfile)


def _devel(args, base, prog) -> int:
    if args.devel == "net-convert":
        kind = NET_KINDS.get(args.kind)
        if kind is None:
            print(f"{prog} devel net-convert: --kind {args.kind} is not supported by cloudseed "
                  "(yaml: network config v1/v2, network_data.json: OpenStack)", file=sys.stderr)
            return 1
        distro = "rhel" if args.distro.lower() in RHEL_LIKE else "debian"
        argv = [*base, "net", "render", args.network_data, "--renderer", args.output_kind,
                "--root", args.directory, "--kind", kind, "--distro", distro]
        for pair in args.mac:
            name, _, mac = pair.partition(",")
            argv += ["--mac", f"{mac}={name}"]
        return _cli(argv)
    if args.devel == "make-mime":
        return _cli([*base, "make-mime", *[f"--attach={f}" for f in args.attach],
                     *(["--list-types"] if args.list_types else []), *(["--force"] if args.mime_force else [])])
    if args.devel == "schema":
        return _schema(args, base, prog)
    if args.devel == "hotplug-hook":
        return _cli([*base, "hotplug-hook", *args.rest])
    print(f"{prog} devel: expected net-convert, make-mime, schema or hotplug-hook", file=sys.stderr)
    return 2


_HANDLERS = {"init": _init, "modules": _modules, "single": _single, "query": _query, "features": _features,
             "schema": _schema, "status": _status, "clean": _clean, "collect-logs": _collect_logs,
             "analyze": _analyze, "devel": _devel}


# /usr/bin/<name> -> the module whose main() it runs; written by the packages (packaging/bin/, the same
# text) and by ``cloudseed install --cloud-init-compat``; never console scripts of the Python package,
# so a pip or pipx install does not shadow a system's cloud-init
LAUNCHERS = {"cloud-init": "cloudseed.commands.cloud_init", "cloud-id": "cloudseed.commands.cloud_id",
             "cloud-init-per": "cloudseed.commands.cloud_init_per"}


def launcher(name: str) -> str:
    """The text of ``/usr/bin/<name>``."""
    return (f"#!/usr/bin/python3\n# {name}: cloud-init's command, answered by cloudseed ({LAUNCHERS[name]})\n"
            f"import sys\n\nfrom {LAUNCHERS[name]} import main\n\nsys.exit(main())\n")


def install_launchers(root) -> list[str]:
    """Write cloud-init's commands into ``root``'s /usr/bin (``cloudseed install --cloud-init-compat``)."""
    return [root.write(f"/usr/bin/{name}", launcher(name), mode=0o755) for name in LAUNCHERS]
