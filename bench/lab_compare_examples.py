#!/usr/bin/env python3
"""``cloudseed lab --compare`` over cloud-init's own documented example cloud-configs.

The examples are taken at run time from Debian's ``cloud-init`` package (its
``/usr/share/doc/cloud-init/examples``: ``apt-get download cloud-init`` and ``dpkg -x``, or the
copy the tests already unpacked in the cache); none of their text is kept in this repository.
Every ``cloud-config-*`` example (gzipped ones unpacked) is given as user-data, with the same
NoCloud meta-data, to a lab VM with cloudseed and to one with Debian's cloud-init 22.4, each a try
restored from its own snapshot (``lab --compare --snapshot``); the system state each leaves is
compared (``lab/reports/state_diff.py``).

Prints a Markdown table (example, identical or how many differences in which categories, each
agent's time) and writes each example's differences to ``--out DIR/<example>.txt`` for reading.
The explanations of the differences (ours, theirs, deliberate) are in docs/lab.md.

Each example's record (differences, errors, agent times) is also kept as ``DIR/<example>.json``;
``--table DIR`` prints the table again from those (after the explanations here changed, or over
several partial runs).

Usage: .venv/bin/python bench/lab_compare_examples.py [--out DIR] [--only NAME ...] [--timeout 600]
       .venv/bin/python bench/lab_compare_examples.py --table DIR [--only NAME ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

from cloudseed.lab.boots import compare
from cloudseed.lab.boots.delivery import Delivery
from cloudseed.lab.images.image import lab_image
from cloudseed.lab.machine.accel import choose_accel
from cloudseed.lab.reports.state_diff import Difference, format_diff

DOCS = "usr/share/doc/cloud-init/examples"

# Differences already explained in docs/lab.md, by what they look like: (category, item pattern,
# cloud-init's side pattern, class). Anything else is printed as unexplained, in full.
KNOWN = (
    ("ssh host keys", r"types", r"also ssh_host_dsa_key\.pub", "no-dsa"),
    ("ssh host keys", r"types", r"also ssh_host_dsa_key\.pub, ssh_host_rsa_key\.pub", "rsa-lost"),
    ("files", r"/etc/udev/rules\.d/70-cloudseed-net\.rules", r".*70-persistent-net\.rules", "udev-name"),
    ("files", r"/etc/\S*cloudseed\S*", r"wrote the same (content|lines \(comments aside\)) as /etc/\S*cloud-init\S*",
     "own-name"),
    ("files", r"/etc/apt/trusted\.gpg\.d/\S+", r"did not write it", "apt-keys"),
    ("files", r"/etc/ssl/certs/\S*", r"wrote it", "image-deps"),
    ("files", r"/etc/ca-certificates\.conf content", r".*", "image-deps"),
    ("files", r"(/etc|/var/lib|/var/backups)/chef/|/var/backups/", r"wrote it", "chef-checked"),
    ("files", r"/etc/apt/sources\.list\.d/\S+\.list", r"wrote it", "apt-taken-back"),
    ("files", r"/etc/apt/keyrings/", r"did not write it", "apt-taken-back"),
    ("fstab", r"entries", r"also .*x-systemd\.requires=cloud-init\.service.*", "own-unit"),
    ("fstab", r"entries", r"also ephemeral0 /mnt .*", "mount-names"),
    ("files", r"/etc/chrony/\S*", r"wrote it", "image-deps"),
    ("users", r"\S+ (uid|gid)", r".*", "user-order"),
    ("groups", r"\S+ gid", r".*", "user-order"),
)
# What each class means, and whose doing it is (printed under the table; docs/lab.md says more)
CLASSES = {
    "no-dsa": "deliberate: no DSA host key (OpenSSH 9 refuses DSA; cloud-init 22.4 still makes one)",
    "udev-name": "deliberate: the NIC's udev rule under cloudseed's own name, with a header comment",
    "own-name": "deliberate: the same file under cloudseed's own name (sshd drop-in 50-cloudseed.conf)",
    "comment": "deliberate: only the header comment differs (each agent names itself)",
    "apt-keys": "theirs: cloud-init's apt_configure stops at the first key it cannot fetch (the image has no "
                "gpg); cloudseed adds the other sources' keys and names each failure",
    "user-order": "ours: users made in the order listed; cloud-init makes the default user last",
    "users-created": "theirs: cloud-init 22.4 stopped at the example's first user (useradd --selinux-user fails "
                     "on Debian without SELinux), so none of its users, groups or sudo rules exist; cloudseed made "
                     "them (it named the snap user and the missing ssh-import-id as errors)",
    "ssh-reloading": "the lab's, most likely: ssh.service was not 'active' in cloudseed's state though the console "
                     "shows it started (the helper reloads sshd once the background RSA key is in place, as the "
                     "state was being collected); not fixed",
    "staged-listed": "the lab's, fixed since: the keys in /etc/ssh were the same; a lab of this run also listed "
                     "the host keys cloudseed started early and did not need (ssh_keys gave its own), which stay "
                     "in /run/cloudseed/hostkeys; the state now keeps them apart (ssh_host_keys_left_staged)",
    "mount-names": "ours: a short device name is written /dev/NAME (sdc: /dev/sdc), and ephemeral0 is left out "
                   "where the datasource has no ephemeral disk; cloud-init 22.4 wrote 'sdc', 'xvdh' and "
                   "'ephemeral0' into fstab as they are (names mount cannot use)",
    "own-unit": "deliberate: a network mount's x-systemd.requires names cloudseed's network stage unit "
                "(cloudseed-network.service) where cloud-init names cloud-init.service",
    "reordered": "the same settings in another order (chef's client.rb lines; firstboot.json, one JSON document, "
                 "keys sorted by cloudseed), each file with its own header comment",
    "private-mode": "deliberate: chef's validation key and first-boot attributes written 0600 (cloud-init: 0644)",
    "image-deps": "the lab's images: the switched image is the lab's Debian tree with cloudseed, without the "
                  "packages cloud-init pulled in: no ca-certificates (cloudseed said update-ca-certificates is "
                  "not installed; it also refused the example's placeholder certificates, not PEM, which "
                  "cloud-init installed as they are), no Jinja2 (cloudseed refused cloud-init's Jinja chrony "
                  "template kept in /etc/cloud, so wrote no chrony.conf; cloud-init wrote it, then failed to "
                  "install chrony)",
    "chef-checked": "ours: the chef settings are checked before anything is done (validation_key is a path; "
                    "the example puts key text there) and nothing is made; cloud-init made chef's directories, "
                    "then failed (chef not installed)",
    "apt-taken-back": "ours: a source that apt-get update refuses is taken back (these VMs could not resolve "
                      "names), with its files (an empty keyrings directory stays); cloud-init leaves the source",
    "rsa-lost": "ours, a bug fixed since these runs: the RSA host key cloudseed finishes in the background was "
                "made but never installed (left in /run/cloudseed/hostkeys; and no DSA key, as no-dsa): a stage "
                "that reported an error failed its unit and systemd killed the helper installing the key; the "
                "stage units now have KillMode=process (tests/e2e/test_boots.py, invalid user-data)",
}
BASELINE = {"no-dsa", "udev-name"}  # on every boot, whatever the user-data


# Differences explained for one example only: example -> (category pattern, item pattern, cloud-init's side
# pattern, class), looked at before KNOWN
ONE_EXAMPLE = {
    "cloud-config-user-groups": (("users|groups|files|sudoers", r".*", r"has no such (user|group)|did not write it|"
                                  r"none|-", "users-created"),),
    "cloud-config-wireguard": (("services", r"active", r"also ssh\.service", "ssh-reloading"),),
}


def classify(difference, example: str = "") -> str:
    """The class of a known difference (a key of CLASSES), or "unexplained"."""
    for category, item, theirs, why in ONE_EXAMPLE.get(example, ()):
        if re.fullmatch(category, difference.category) and re.fullmatch(item, difference.item) and \
                re.fullmatch(theirs, difference.theirs):
            return why
    for category, item, theirs, why in KNOWN:
        if difference.category == category and re.fullmatch(item, difference.item) and \
                re.fullmatch(theirs, difference.theirs):
            return why
    if difference.category == "ssh host keys" and difference.theirs == "-" and "(not in place" in difference.ours:
        return "staged-listed"
    changed = [line[1:].strip() for line in difference.detail.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    if difference.category == "files" and difference.item.endswith(" content") and changed and \
            all(line.startswith(("#", "//")) for line in changed):
        return "comment"
    if difference.category == "files" and difference.item.endswith(" content") and changed and \
            _same_settings(difference.detail):
        return "reordered"
    if difference.category == "files" and difference.item.endswith(" mode") and difference.ours == "0600" and \
            re.search(r"/(validation\.pem|firstboot\.json|\S*key\S*)$", difference.item[:-5]):
        return "private-mode"
    return "unexplained"


def _same_settings(detail: str) -> bool:
    """The lines taken out and put in are the same settings: reordered, comments and blank lines
    aside, or one JSON document either way."""
    removed = [line[1:].strip() for line in detail.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in detail.splitlines() if line.startswith("+") and not line.startswith("+++")]
    def settings(lines: list[str]) -> list[str]:
        return sorted(line for line in lines if line and not line.startswith(("#", "//")))
    if settings(removed) == settings(added):
        return True
    try:
        return len(removed) == len(added) == 1 and json.loads(removed[0]) == json.loads(added[0])
    except ValueError:
        return False


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
    parser.add_argument("--table", metavar="DIR", help="print the table of the examples recorded in DIR, run nothing")
    args = parser.parse_args()
    if args.table:
        table(args.table, args.only)
        return 0
    os.makedirs(args.out, exist_ok=True)
    chosen = examples(examples_dir(), args.only)
    image = lab_image("switched")  # the two images lab --compare boots (compare.AGENTS)
    lab_image("reference")
    accel, reason = choose_accel("auto", image.kernel, image.initrd)
    print(f"# {len(chosen)} examples of Debian's cloud-init package; accelerator {accel}", file=sys.stderr)
    for name, data in chosen:
        work = tempfile.mkdtemp(prefix=f"bench-compare-{name}-")
        user_data = os.path.join(work, "user-data")
        with open(user_data, "wb") as handle:
            handle.write(data)
        print(f"# {name}", file=sys.stderr, flush=True)
        comparison = compare.run(Delivery(user_data=user_data, instance_id="iid-example", hostname="example"),
                                 accel, reason, work, timeout=args.timeout, snapshots=True)
        text = format_diff(comparison.differences, comparison.names)
        errors = [f"{r.name}: {r.error}" for r in comparison.runs if r.error]
        with open(os.path.join(args.out, f"{name}.txt"), "w") as handle:
            handle.write("\n".join([compare.agent_times(comparison), "", text, *errors]) + "\n")
            statuses = {r.name: (r.result.status or {}) for r in comparison.runs}
            handle.write("\n" + json.dumps(statuses, default=str)[:20000])
        record = {"differences": [dataclasses.asdict(d) for d in comparison.differences], "errors": errors,
                  "agent_seconds": [r.result.agent_seconds for r in comparison.runs],
                  "agents": compare.agent_times(comparison)}
        with open(os.path.join(args.out, f"{name}.json"), "w") as handle:
            json.dump(record, handle, indent=1)
        print(row(name, record)[0], flush=True)
    table(args.out, [name for name, _ in chosen])
    return 0


def row(name: str, record: dict) -> tuple[str, str]:
    """The example's table row and its kind (identical, explained, unexplained, not compared)."""
    differences = [Difference(**d) for d in record["differences"]]
    classes = [classify(d, name) for d in differences]
    unexplained = [d for d, c in zip(differences, classes) if c == "unexplained"]
    known = sorted(set(c for c in classes if c != "unexplained") - BASELINE)
    if record["errors"]:
        verdict, kind = "not compared: " + "; ".join(record["errors"]), "not compared"
    elif not differences:
        verdict, kind = "identical", "identical"
    elif not unexplained and not known:
        verdict, kind = "identical but for the baseline", "baseline"
    elif not unexplained:
        verdict, kind = "baseline and " + ", ".join(known), "explained"
    else:
        kind = "unexplained"
        verdict = "; ".join(d.line(("cloudseed", "cloud-init")) for d in unexplained) + \
            (f" (and {', '.join(known)})" if known else "")
    times = [f"{t:.1f}s" if t is not None else "-" for t in record["agent_seconds"]]
    # each agent's own errors (its status), from the lines compare.agent_times wrote
    errors = [m.group(1) if (m := re.search(r"(\d+) error\(s\)", line)) else "0"
              for line in record["agents"].splitlines()[:2]]
    return f"| {name} | {verdict} | {' / '.join(errors)} | {times[0]} / {times[1]} |", kind


def table(directory: str, names: list[str]) -> None:
    """The Markdown table of every example recorded in ``directory`` (``names``: these only)."""
    rows, kinds = [], []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        name = os.path.basename(path)[:-5]
        if names and name not in names:
            continue
        with open(path) as handle:
            line, kind = row(name, json.load(handle))
        rows.append(line)
        kinds.append(kind)
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in ("identical", "baseline", "explained", "unexplained",
                                                         "not compared"))
    print(f"\n{len(rows)} examples: {counts}. Baseline: {', '.join(sorted(BASELINE))}, on every boot; explained: "
          "the baseline and the classes named\n")
    print("| example | state left | errors, cloudseed / cloud-init | agent time, cloudseed / cloud-init |\n"
          "|---|---|---|---|")
    print("\n".join(rows))
    print("\n" + "\n".join(f"- {key}: {why}" for key, why in CLASSES.items()))


if __name__ == "__main__":
    sys.exit(main())
