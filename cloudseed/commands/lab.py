"""``cloudseed lab``: boot a real VM with a seed or the metadata server and report what the agent did.

The image is built once (debootstrap) and cached; the cloudseed in it is the working tree's.
Every boot runs on a throw-away overlay. Progress is shown as stages start and finish, then a
report: stages and durations, each module's result, errors, time to SSH and agent time, and the
boot as a timeline (``--html``: the same as a page).

Beyond one boot: ``--repeat``/``--watch`` try a cloud-config again and again from a snapshot
taken before the agent reads its seed (seconds per try); ``--expect`` checks what should hold in
the guest (``--junit`` for CI); ``--compare`` boots the same data with Debian's cloud-init too and
prints how the resulting systems differ; ``--parallel N`` runs every file of a directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

HELP = "boot a VM (qemu) with a seed or the metadata server and report what the agent did"


def configure(parser: argparse.ArgumentParser) -> None:
    image = parser.add_argument_group("image")
    image.add_argument("--agent", choices=("cloudseed", "reference", "switched", "none"), default="cloudseed",
                       help="agent in the lab image (reference = Debian's cloud-init; switched = cloudseed with "
                       "Debian cloud-init's /etc/cloud kept); default cloudseed")
    image.add_argument("--image", metavar="FILE", help="boot this qcow2/raw cloud image instead")
    source = parser.add_argument_group("datasource")
    source.add_argument("--datasource", choices=("nocloud", "configdrive", "openstack", "ec2", "gce",
                                                 "digitalocean", "hetzner", "oracle", "azure"),
                        default="nocloud", help="how the instance data reaches the guest (default nocloud; azure: "
                        "the provisioning ISO, IMDS and the wire server)")
    source.add_argument("--fs", choices=("iso9660", "vfat", "udf"), default="iso9660",
                        help="seed filesystem (udf: Azure's provisioning media only)")
    source.add_argument("--seed", metavar="FILE", action="append", default=[],
                        help="attach this ready-made seed image instead of building one")
    source.add_argument("--instance-id", metavar="ID", default="iid-lab-0001")
    source.add_argument("--hostname", metavar="NAME", default="labhost")
    source.add_argument("--user-data", metavar="FILE", help="the user-data (with --parallel: a directory of them)")
    source.add_argument("--meta-data", metavar="FILE")
    source.add_argument("--vendor-data", metavar="FILE")
    source.add_argument("--network-config", metavar="FILE")
    source.add_argument("--ssh-key", metavar="FILE", action="append", default=[])
    source.add_argument("--db", metavar="URL", help="take the instance from this registry")
    source.add_argument("--instance", metavar="ID", help="the instance to take from --db")
    source.add_argument("--imds-tokens", choices=("optional", "required"),
                        help="EC2: whether IMDSv2 tokens are required")
    vm = parser.add_argument_group("vm")
    vm.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto")
    vm.add_argument("--keep", action="store_true", help="leave the VM running and print how to SSH in")
    vm.add_argument("--timeout", type=float, default=420, help="seconds to wait for the agent (default 420)")
    vm.add_argument("--workdir", metavar="DIR", help="where the overlay and console log go")
    tries = parser.add_argument_group("tries: a VM saved before the agent reads its seed, restored per try")
    tries.add_argument("--snapshot", action="store_true",
                       help="start from the snapshot (made once per image and datasource, then cached)")
    tries.add_argument("--repeat", nargs="?", type=int, const=0, metavar="N",
                       help="try again after each report (Enter; q stops), or N times in a row")
    tries.add_argument("--watch", action="store_true", help="try again whenever a given file is saved")
    tries.add_argument("--parallel", type=int, metavar="N",
                       help="with --user-data DIR: every file of DIR, N VMs at a time, and a summary table")
    checks = parser.add_argument_group("checks and reports")
    checks.add_argument("--expect", metavar="FILE", help="what should hold in the guest once the agent is done "
                        "(YAML: files, users, groups, services, packages, mounts, hostname, commands); "
                        "exit status 0 only if all of it holds")
    checks.add_argument("--junit", metavar="FILE", help="write the checks as JUnit XML")
    checks.add_argument("--compare", action="store_true",
                        help="boot the same data with Debian's cloud-init too and print how the systems differ")
    checks.add_argument("--html", metavar="FILE", help="write the report and the timeline as one HTML page")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _progress(event) -> None:
    text = {
        "kernel": "kernel started",
        "stage-start": f"stage {event.stage} start",
        "stage-done": f"stage {event.stage} finished in {event.seconds:.2f}s "
                      f"({event.modules} modules, {event.errors} errors)",
        "agent-done": "agent finished",
        "ssh-ready": "SSH ready",
        "gate": "restored from the snapshot" if event.stage == "released" else "",
    }.get(event.kind)
    if text:
        print(f"[{event.at:7.1f}s] {text}", file=sys.stderr, flush=True)


def _say(text: str) -> None:
    print(f"lab: {text}", file=sys.stderr, flush=True)


class UsageError(Exception):
    """Options that do not go together."""


def _check_usage(args: argparse.Namespace) -> None:
    tries = args.repeat is not None or args.watch or args.parallel is not None or args.snapshot
    if args.image and (tries or args.expect or args.compare):
        raise UsageError("--image boots a cloud image as it is: snapshots, --expect and --compare need a lab "
                         "image (its helper sits in the guest)")
    if args.keep and (tries or args.compare):
        raise UsageError("--keep keeps one booted VM: not with --repeat, --watch, --parallel, --snapshot or --compare")
    if args.parallel is not None:
        if args.parallel < 1:
            raise UsageError("--parallel N: N is at least 1")
        if not (args.user_data and os.path.isdir(args.user_data)):
            raise UsageError("--parallel runs every file of a directory: give it with --user-data DIR")
        if args.repeat is not None or args.watch or args.compare:
            raise UsageError("--parallel does not go with --repeat, --watch or --compare")
    elif args.user_data and os.path.isdir(args.user_data):
        raise UsageError(f"--user-data {args.user_data} is a directory: that is for --parallel N")
    if args.watch and not any((args.user_data, args.meta_data, args.vendor_data, args.network_config)):
        raise UsageError("--watch needs a file to watch: --user-data (or --meta-data, --vendor-data, --network-config)")
    if args.compare and (args.repeat is not None or args.watch):
        raise UsageError("--compare runs once: give --snapshot for the fast way")
    if args.compare and args.agent != "cloudseed":
        raise UsageError("--compare boots both agents itself: leave --agent out")
    if tries and args.agent == "none":
        raise UsageError("snapshots hold an agent before it reads its seed: --agent cloudseed or reference")
    if args.datasource == "azure" and tries:
        raise UsageError("snapshots are not made for azure yet (its provisioning media and wire server): boot it "
                         "in full")


def _delivery(args: argparse.Namespace):
    from cloudseed.lab.boots.delivery import Delivery

    return Delivery(datasource=args.datasource, fs=args.fs, seeds=list(args.seed), instance_id=args.instance_id,
                    hostname=args.hostname, user_data=None if args.parallel else args.user_data,
                    meta_data=args.meta_data, vendor_data=args.vendor_data, network_config=args.network_config,
                    ssh_keys=list(args.ssh_key), db=args.db, instance=args.instance, imds_tokens=args.imds_tokens)


def run(args: argparse.Namespace) -> int:
    import signal

    from cloudseed.lab.images.rootfs import ImageBuildError
    from cloudseed.lab.machine.vm import LabError
    from cloudseed.lab.reports.checks import ExpectError, load
    from cloudseed.provider.seeds.errors import SeedError

    # VMs run in sessions of their own: a terminated lab stops them on the way out (lab/machine/vm.py's atexit)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        _check_usage(args)
        expect = load(args.expect) if args.expect else None
        delivery = _delivery(args)
        if not args.parallel:
            delivery.spec()  # bad input is said before anything boots
        from cloudseed.lab.cache import lab_dir

        workdir = args.workdir or tempfile.mkdtemp(prefix="run-", dir=lab_dir("runs"))
        os.makedirs(workdir, exist_ok=True)
        if args.compare:
            return _compare(args, delivery, expect, workdir)
        if args.repeat is not None or args.watch or args.parallel is not None or args.snapshot:
            return _tries(args, delivery, expect, workdir)
        return _boot(args, delivery, expect, workdir)
    except (UsageError, ExpectError, SeedError, ImageBuildError, LabError) as error:
        print(f"cloudseed lab: error: {error}", file=sys.stderr)
        return 2


def _accel(args: argparse.Namespace, image) -> tuple[str, str]:
    from cloudseed.lab.machine.accel import choose_accel

    if image.kernel:
        return choose_accel(args.accel, image.kernel, image.initrd)
    return ("tcg", "external image") if args.accel == "auto" else (args.accel, "requested")


def _outputs(args: argparse.Namespace, title: str, runs: list[tuple[str, object, object, object]],
             differences: str | None = None, meta: str = "") -> None:
    """--html and --junit for ``runs``: (name, BootResult, checks or None, error or None)."""
    if args.junit:
        from cloudseed.lab.reports import junit
        from cloudseed.lab.reports.checks import agent_check

        suites = []
        for name, result, checks, error in runs:
            listed = list(checks) if checks is not None else \
                [agent_check(result.status, result.result, result.agent_log)]
            suites.append(junit.SuiteRun(name, [] if error or result.timed_out else listed, result.agent_seconds or 0.0,
                                         error or ("the agent did not finish" if result.timed_out else None)))
        junit.write(args.junit, suites)
    if args.html:
        from cloudseed.lab.reports import report_html
        from cloudseed.lab.reports.report import report_dict
        from cloudseed.lab.reports.timeline import build

        lanes = [build(result, name) for name, result, _, _ in runs]
        page = report_html.render(title, lanes, [report_dict(result) for _, result, _, _ in runs],
                                  [checks for _, _, checks, _ in runs], differences, meta)
        report_html.write(args.html, page)
        _say(f"report written to {args.html}")


def _boot(args: argparse.Namespace, delivery, expect, workdir: str) -> int:
    from cloudseed.lab.boots.session import run_boot
    from cloudseed.lab.images.image import external_image, lab_image
    from cloudseed.lab.reports.checks import judge, queries, summary
    from cloudseed.lab.reports.report import format_report, report_dict
    from cloudseed.lab.reports.timeline import build, render_text

    image = external_image(args.image) if args.image else lab_image(args.agent)
    accel, reason = _accel(args, image)
    _say(f"accelerator {accel} ({reason}); workdir {workdir}")
    seeds, server = delivery.prepare(workdir)

    def inspect(channel) -> dict:
        return {"facts": channel.request("facts", queries=queries(expect), wait=300)["facts"]}

    with server as running:
        port = running.port if running else None
        result = run_boot(image, workdir, accel=accel, accel_reason=reason, seeds=seeds, metadata_port=port,
                          platform=delivery.platform, timeout=args.timeout, keep=args.keep, progress=_progress,
                          inspect=inspect if expect is not None else None)
        if running:
            result.metadata_requests = running.request_count()
        if running and delivery.platform == "azure":
            health = running.azure_health()
            _say("the wire server " + (f"recorded the VM {health.get('state')} at {health.get('received_at')}"
                                       if health else "received no health report"))
        if args.keep and running:
            running.process = None  # leave the server running for the kept VM
    checks, error = None, None
    if expect is not None and not result.timed_out:
        inspected = result.inspected or {}
        if "error" in inspected:
            error = inspected["error"]
        else:
            checks = judge(expect, inspected.get("facts") or [], result.status, result.result, result.agent_log)
    if args.json:
        data = report_dict(result)
        data["checks"] = [vars(c) for c in checks] if checks is not None else None
        print(json.dumps(data, indent=2, default=str))
    else:
        print(format_report(result) + "\n\n" + render_text([build(result, image.agent)]))
        if checks is not None:
            print("\n" + summary(checks))
        if error:
            print(f"\nchecks not evaluated: {error}")
    _outputs(args, f"cloudseed lab: {image.agent}", [(image.agent, result, checks, error)],
             meta=f"{delivery.datasource} datasource, {accel}")
    if args.keep and result.vm and result.vm.running():
        result.vm.detached = True
        print(f"\nthe VM is still running (qemu pid {result.vm.process.pid}); log in with:\n"
              f"  ssh -p {result.vm.ssh_port} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
              f"USER@127.0.0.1\nstop it with: kill {result.vm.process.pid}")
    elif os.path.exists(result.overlay):
        os.unlink(result.overlay)
    if result.timed_out or error:
        return 1
    return 1 if checks and any(not c.ok for c in checks) else 0


def _tries(args: argparse.Namespace, delivery, expect, workdir: str) -> int:
    from cloudseed.lab.boots import parallel, repeat
    from cloudseed.lab.boots.tries import TrySession
    from cloudseed.lab.images.image import lab_image

    image = lab_image(args.agent)
    accel, reason = _accel(args, image)
    _say(f"accelerator {accel} ({reason}); workdir {workdir}")
    session = TrySession(image, delivery, accel, reason, workdir, timeout=args.timeout, expect=expect,
                         progress=None if args.parallel or args.json else _progress, say=_say)
    if args.parallel is not None:
        files = parallel.user_data_files(args.user_data)
        if not files:
            raise UsageError(f"--user-data {args.user_data}: no files in it")
        _say(f"{len(files)} files, {args.parallel} VMs at a time")
        rows = parallel.run(session, files, args.parallel,
                            lambda name, outcome: _say(f"{name}: done in {outcome.seconds:.1f}s"))
        print(json.dumps([json.loads(repeat.describe(o, True)) | {"file": n} for n, o in rows], indent=2)
              if args.json else parallel.table(rows))
        _outputs(args, "cloudseed lab: parallel runs",
                 [(name, o.result, o.checks, o.error) for name, o in rows], meta=f"{len(rows)} files")
        return max((repeat.verdict(o) for _, o in rows), default=0)
    watched = [p for p in (args.user_data, args.meta_data, args.vendor_data, args.network_config) if p]

    def after(outcome) -> None:
        _outputs(args, f"cloudseed lab: try {outcome.number}",
                 [(f"try {outcome.number}", outcome.result, outcome.checks, outcome.error)],
                 meta=f"{delivery.datasource} datasource, {accel}, restored from a snapshot")

    count = 1 if args.snapshot and args.repeat is None and not args.watch else \
        (args.repeat if args.repeat else None)
    return repeat.run(session, count, args.watch, watched, after, as_json=args.json)


def _compare(args: argparse.Namespace, delivery, expect, workdir: str) -> int:
    from cloudseed.lab.boots import compare
    from cloudseed.lab.images.image import lab_image
    from cloudseed.lab.reports.report import format_report
    from cloudseed.lab.reports.state_diff import format_diff

    accel, reason = _accel(args, lab_image("cloudseed"))
    _say(f"accelerator {accel} ({reason}); workdir {workdir}")
    comparison = compare.run(delivery, accel, reason, workdir, timeout=args.timeout, expect=expect,
                             snapshots=args.snapshot, progress=None if args.json else _progress, say=_say)
    text = format_diff(comparison.differences, comparison.names)
    if args.json:
        print(json.dumps({"runs": [{"name": r.name, "agent_seconds": r.result.agent_seconds,
                                    "agent_done_at": r.result.agent_done_at, "error": r.error,
                                    "seconds": r.seconds} for r in comparison.runs],
                          "differences": [vars(d) for d in comparison.differences]}, indent=2, default=str))
    else:
        for run in comparison.runs:
            print(f"== {run.name}\n{format_report(run.result)}\n")
        print(compare.agent_times(comparison) + "\n")
        print(text)
    _outputs(args, "cloudseed lab: cloudseed and cloud-init, same data",
             [(r.name, r.result, r.checks, r.error) for r in comparison.runs], differences=text,
             meta=f"{delivery.datasource} datasource, {accel}")
    if any(r.error or r.state is None for r in comparison.runs):
        return 1
    if any(r.checks and any(not c.ok for c in r.checks) for r in comparison.runs):
        return 1
    return 0
