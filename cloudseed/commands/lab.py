"""``cloudseed lab``: boot a real VM with a seed or the metadata server and report what the agent did.

The image is built once (debootstrap) and cached; the cloudseed in it is the working tree's.
Every boot runs on a throw-away overlay. Progress is shown as stages start and finish, then a
report: stages and durations, each module's result, errors, time to SSH and agent time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile

HELP = "boot a VM (qemu) with a seed or the metadata server and report what the agent did"


def configure(parser: argparse.ArgumentParser) -> None:
    image = parser.add_argument_group("image")
    image.add_argument("--agent", choices=("cloudseed", "reference", "none"), default="cloudseed",
                       help="agent in the lab image (reference = Debian's cloud-init); default cloudseed")
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
    source.add_argument("--user-data", metavar="FILE")
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
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _progress(event) -> None:
    text = {
        "kernel": "kernel started",
        "stage-start": f"stage {event.stage} start",
        "stage-done": f"stage {event.stage} finished in {event.seconds:.2f}s "
                      f"({event.modules} modules, {event.errors} errors)",
        "agent-done": "agent finished",
        "ssh-ready": "SSH ready",
    }.get(event.kind)
    if text:
        print(f"[{event.at:7.1f}s] {text}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from cloudseed.lab.accel import choose_accel
    from cloudseed.lab.cache import lab_dir
    from cloudseed.lab.image import external_image, lab_image
    from cloudseed.lab.metadata import MetadataServer
    from cloudseed.lab.report import format_report, report_dict
    from cloudseed.lab.rootfs import ImageBuildError
    from cloudseed.lab.session import run_boot
    from cloudseed.lab.vm import LabError
    from cloudseed.provider.seeds.build import build_seed
    from cloudseed.provider.seeds.errors import SeedError
    from cloudseed.provider.seeds.spec import spec_from_files, spec_from_registry

    workdir = args.workdir or tempfile.mkdtemp(prefix="run-", dir=lab_dir("runs"))
    os.makedirs(workdir, exist_ok=True)
    try:
        image = external_image(args.image) if args.image else lab_image(args.agent)
        accel, reason = choose_accel(args.accel, image.kernel, image.initrd) if image.kernel else \
            (("tcg", "external image") if args.accel == "auto" else (args.accel, "requested"))
        print(f"lab: accelerator {accel} ({reason}); workdir {workdir}", file=sys.stderr)
        if args.db or args.instance:
            if not (args.db and args.instance):
                raise SeedError("--db and --instance go together")
            spec = spec_from_registry(args.db, args.instance)
        else:
            spec = spec_from_files(args.instance_id, args.hostname, args.meta_data, args.user_data,
                                   args.vendor_data, args.network_config, args.ssh_key)
        seeds = list(args.seed)
        server: contextlib.AbstractContextManager = contextlib.nullcontext()
        platform = None
        if args.datasource in ("openstack", "ec2", "gce", "digitalocean", "hetzner", "oracle", "azure"):
            server = MetadataServer(spec, workdir, imds_tokens=args.imds_tokens)
            platform = args.datasource
        if args.datasource == "azure" and not seeds:  # the provisioning media beside IMDS
            seed = os.path.join(workdir, f"seed-azure.{args.fs}")
            build_seed("azure", args.fs, spec, seed)
            seeds.append(seed)
        elif platform is None and not seeds:
            seed = os.path.join(workdir, f"seed-{args.datasource}.{args.fs}")
            build_seed(args.datasource, args.fs, spec, seed)
            seeds.append(seed)
        with server as running:
            port = running.port if running else None
            result = run_boot(image, workdir, accel=accel, accel_reason=reason, seeds=seeds,
                              metadata_port=port, platform=platform, timeout=args.timeout,
                              keep=args.keep, progress=_progress)
            if running:
                result.metadata_requests = running.request_count()
            if running and platform == "azure":
                health = running.azure_health()
                print("lab: the wire server " + (f"recorded the VM {health.get('state')} at {health.get('received_at')}"
                                                 if health else "received no health report"), file=sys.stderr)
            if args.keep and running:
                running.process = None  # leave the server running for the kept VM
    except (SeedError, ImageBuildError, LabError) as error:
        print(f"cloudseed lab: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report_dict(result), indent=2, default=str) if args.json else format_report(result))
    if args.keep and result.vm and result.vm.running():
        result.vm.detached = True
        print(f"\nthe VM is still running (qemu pid {result.vm.process.pid}); log in with:\n"
              f"  ssh -p {result.vm.ssh_port} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
              f"USER@127.0.0.1\nstop it with: kill {result.vm.process.pid}")
    elif os.path.exists(result.overlay):
        os.unlink(result.overlay)
    return 1 if result.timed_out else 0
