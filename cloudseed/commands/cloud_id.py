"""``cloudseed cloud-id [--json] [--long] [--instance-data FILE]``: the canonical cloud id (cloud-init's ``cloud-id``).

Prints the cloud this instance runs on (``aws``, ``aws-china``, ``openstack``, ``nocloud``...).
Exit 0 with an answer, 1 when the instance data cannot be read, 2 when the agent is disabled
(prints ``disabled``), 3 when it has not run yet (prints ``not started``, as cloud-init 24.x+):
cloud-init's codes.
Installed as ``/usr/bin/cloud-id`` by the package (``main``).
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "print the canonical cloud id of this instance (cloud-init's cloud-id)"

UNKNOWN = "unknown"  # as cloud-init writes an unknown region


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", "-j", action="store_true", help="all the standard v1 keys as JSON")
    parser.add_argument("--long", "-l", action="store_true", help="cloud id and region, tab separated")
    parser.add_argument("--instance-data", "-i", metavar="FILE",
                        help="instance data to read (default: /run/cloudseed/instance-data.json)")


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.state import Paths
    from cloudseed.agent.state.instance_data_json import canonical_cloud_id
    from cloudseed.commands.status import _summary
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    paths = Paths(root)
    state = _summary(root, paths)["status"]
    if state == "disabled":
        print("disabled")
        return 2
    if state == "not started":
        print("not started")   # cloud-init 24.x+ (22.4 printed "not run")
        return 3
    source = args.instance_data or root.path(paths.instance_data_file)
    try:
        with open(source, encoding="utf-8") as f:
            data = json.load(f)
    except OSError:
        print(f"cloud-id: cannot read instance data {source}; name one with --instance-data", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"cloud-id: {source} is not valid JSON: {e}", file=sys.stderr)
        return 1
    v1 = data.get("v1") or {}
    cloud_id = canonical_cloud_id(v1.get("cloud_name"), v1.get("region"), v1.get("platform"))
    if args.json:
        print(json.dumps({**v1, "cloud_id": cloud_id}, indent=1, sort_keys=True, separators=(",", ": ")))
    elif args.long:
        print(f"{cloud_id}\t{v1.get('region', UNKNOWN)}")
    else:
        print(cloud_id)
    return 0


def main() -> int:
    """``/usr/bin/cloud-id``."""
    from cloudseed.cli import main as cli_main

    return cli_main(["cloud-id", *sys.argv[1:]])
