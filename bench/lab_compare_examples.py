#!/usr/bin/env python3
"""``cloudseed lab --compare`` over cloud-init's own documented example cloud-configs.

The examples are taken at run time from Debian's ``cloud-init`` package (its
``/usr/share/doc/cloud-init/examples``: ``apt-get download cloud-init`` and ``dpkg -x``, or the
copy the tests already unpacked in the cache); none of their text is kept in this repository.
Every ``cloud-config-*`` example (gzipped ones unpacked) is given as user-data, with the same
NoCloud meta-data, to a lab VM with cloudseed and to one with Debian's cloud-init 22.4, each a try
restored from its own snapshot (``lab --compare --snapshot``); the system state each leaves is
compared (``lab/state_diff.py``).

Prints a Markdown table (example, identical or how many differences in which categories, each
agent's time) and writes each example's differences to ``--out DIR/<example>.txt`` for reading.
The explanations of the differences (ours, theirs, deliberate) are in docs/lab.md.

Usage: .venv/bin/python bench/lab_compare_examples.py [--out DIR] [--only NAME ...] [--timeout 600]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

from cloudseed.lab import compare
from cloudseed.lab.accel import choose_accel
from cloudseed.lab.delivery import Delivery
from cloudseed.lab.image import lab_image
from cloudseed.lab.state_diff import format_diff

DOCS = "usr/share/doc/cloud-init/examples"

# Differences already explained in docs/lab.md ("why"), by what they look like: (category, item
# pattern, cloud-init's side pattern, class). Anything else is printed as unexplained.
KNOWN = (
    ("ssh host keys", r"types", r"also ssh_host_dsa_key\.pub", "deliberate: no DSA host key"),
    ("files", r"/etc/udev/rules\.d/70-cloudseed-net\.rules", r".*70-persistent-net\.rules",
     "deliberate: the NIC's udev rule under cloudseed's own name, with a header"),
    ("files", r"/etc/\S*cloudseed\S*", r"wrote the same (content|lines \(comments aside\)) as /etc/\S*cloud-init\S*",
     "deliberate: cloudseed's own name for the same file (sshd drop-in 50-cloudseed.conf: docs/identity.md)"),
    ("users", r"(debian|tester|\w+) (uid|gid)", r".*", "ours: users created in the order listed (cloud-init: "
                                                       "the default user last)"),
    ("groups", r"(debian|\w+) gid", r".*", "ours: users created in the order listed (cloud-init: the default "
                                           "user last)"),
)


def classify(difference) -> str:
    """The class and reason of a known difference, or "unexplained"."""
    import re

    for category, item, theirs, why in KNOWN:
        if difference.category == category and re.fullmatch(item, difference.item) and \
                re.fullmatch(theirs, difference.theirs):
            return why
    return "unexplained"


def examples_dir() -> str:
    """Debian's cloud-init examples: the tests' unpacked copy, or the package fetched now."""
    cache = os.environ.get("CLOUDSEED_CACHE") or os.path.expanduser("~/.cache/cloudseed")
    unpacked = os.path.join(cache, "reference", DOCS)
    if os.path.isdir(unpacked):
        return unpacked
    target = tempfile.mkdtemp(prefix="cloud-init-deb-")
    os.chmod(target, 0o755)  # apt's sandbox user writes here
    subprocess.run(["apt-get", "download", "cloud-init"], cwd=target, check=True, capture_output=True)
    deb = glob.glob(os.path.join(target, "cloud-init_*.deb"))[0]
    subprocess.run(["dpkg", "-x", deb, os.path.join(target, "tree")], check=True)
    return os.path.join(target, "tree", DOCS)


def examples(directory: str, only: list[str]) -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "cloud-config-*"))):
        name = os.path.basename(path).removesuffix(".gz").removesuffix(".txt")
        if only and name not in only:
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        out.append((name, gzip.decompress(data) if path.endswith(".gz") else data))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/compare-examples", help="where each example's differences go")
    parser.add_argument("--only", nargs="*", default=[], help="these examples only (names without .txt)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for each agent to finish")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    chosen = examples(examples_dir(), args.only)
    image = lab_image("switched")  # the two images lab --compare boots (compare.AGENTS)
    lab_image("reference")
    accel, reason = choose_accel("auto", image.kernel, image.initrd)
    print(f"# {len(chosen)} examples of Debian's cloud-init package; accelerator {accel}", file=sys.stderr)
    rows, identical, explained = [], 0, 0
    for name, data in chosen:
        work = tempfile.mkdtemp(prefix=f"bench-compare-{name}-")
        user_data = os.path.join(work, "user-data")
        with open(user_data, "wb") as handle:
            handle.write(data)
        print(f"# {name}", file=sys.stderr, flush=True)
        comparison = compare.run(Delivery(user_data=user_data, instance_id="iid-example", hostname="example"),
                                 accel, reason, work, timeout=args.timeout, snapshots=True)
        ours, theirs = comparison.runs
        text = format_diff(comparison.differences, comparison.names)
        errors = [f"{r.name}: {r.error}" for r in comparison.runs if r.error]
        with open(os.path.join(args.out, f"{name}.txt"), "w") as handle:
            handle.write("\n".join([compare.agent_times(comparison), "", text, *errors]) + "\n")
            statuses = {r.name: (r.result.status or {}) for r in comparison.runs}
            handle.write("\n" + json.dumps(statuses, default=str)[:20000])
        classes = [classify(d) for d in comparison.differences]
        unexplained = [d for d, c in zip(comparison.differences, classes) if c == "unexplained"]
        if errors:
            verdict = "not compared: " + "; ".join(errors)
        elif not comparison.differences:
            verdict, identical = "identical", identical + 1
        elif not unexplained:
            verdict = "identical but for: " + "; ".join(sorted(set(classes)))
            explained += 1
        else:
            categories = sorted({d.category for d in unexplained})
            verdict = (f"{len(unexplained)} more ({', '.join(categories)})"
                       + (f"; and {'; '.join(sorted(set(c for c in classes if c != 'unexplained')))}"
                          if len(unexplained) < len(classes) else ""))
        with open(os.path.join(args.out, f"{name}.txt"), "a") as handle:
            handle.write("\n\nclasses:\n" + "\n".join(f"  {c}: {d.line(comparison.names)}"
                                                    for d, c in zip(comparison.differences, classes)) + "\n")
        times = [f"{r.result.agent_seconds:.1f}s" if r.result.agent_seconds is not None else "-"
                 for r in (ours, theirs)]
        rows.append(f"| {name} | {verdict} | {times[0]} | {times[1]} |")
        print(rows[-1], flush=True)
    print(f"\n{identical} of {len(chosen)} examples leave an identical state; {explained} more differ only in "
          "the known ways (docs/lab.md).\n")
    print("| example | state | cloudseed agent time | cloud-init agent time |\n|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
