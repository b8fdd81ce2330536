"""Each state file the agent reads, damaged in turn (truncated, the wrong type, garbage, a directory in
its place): ``status`` never crashes, the agent sets a damaged file aside (kept beside it as
``NAME.damaged-1``) with a warning naming it, and the boot ends where a clean boot ends.

Files of ``/run/cloudseed`` are damaged between the network stage and the config stage; files of
``/var/lib/cloudseed`` between one boot and the next.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.agent.faults import fault_support as fs

IID = "/var/lib/cloudseed/instances/iid-faults"
KINDS = ("truncated", "wrong type", "garbage", "directory")
GARBAGE = b"\x00\xff{\"v1\": [\n\x1b[31m\x00garbage"

# file -> (when it is damaged, what a JSON value of the wrong type is, the kinds that must be set aside
# with a warning; the others are repaired without one: a cache, or a value that cannot be told from
# a good one)
RUN = {
    "/run/cloudseed/status.json": ('{"v1": null}', KINDS),
    "/run/cloudseed/boot.json": ('{"instance_id": 7}', KINDS),
    "/run/cloudseed/datasource.json": ("[1, 2]", KINDS),
    "/run/cloudseed/combined-cloud-config.json": ('"runcmd"', KINDS),
    "/run/cloudseed/instance-data.json": ('{"v1": []}', KINDS),
    "/run/cloudseed/instance-data-sensitive.json": ("[]", KINDS),
}
PERSISTENT = {
    "/var/lib/cloudseed/data/instance-id": ("iid-faults\niid-other", KINDS),
    f"{IID}/datasource.json": ("[]", ("directory",)),
    f"{IID}/cloud-config.parsed.json": ("[]", ("directory",)),
    f"{IID}/cloud-config.checked.json": ("[]", ("directory",)),
    "/var/lib/cloudseed/lock": ("link", ("wrong type", "directory")),
    "/var/lib/cloudseed/instance": ("link", ("truncated", "garbage", "directory")),
    f"{IID}/sem": ("link", ("truncated", "wrong type", "garbage")),
    "/var/lib/cloudseed/sem": ("link", ("truncated", "wrong type", "garbage")),
}
CASES = [(f, k) for table in (RUN, PERSISTENT) for f in table for k in KINDS
         if not (k == "directory" and f.endswith("/sem"))]


def damage(root, inner: str, kind: str, wrong: str) -> None:
    host = root.path_nofollow(inner)
    if os.path.isdir(host) and not os.path.islink(host):
        shutil.rmtree(host)
    elif os.path.lexists(host):
        os.unlink(host)
    if kind == "directory":
        os.makedirs(os.path.join(host, "inside"))
    elif kind == "wrong type" and wrong == "link":
        os.symlink("/etc/hostname", host)      # a link to a file where a plain file or a directory belongs
    else:
        content = {"truncated": b"", "garbage": GARBAGE, "wrong type": wrong.encode()}[kind]
        with open(host, "wb") as handle:
            handle.write(content)


def status_never_crashes(root) -> dict:
    """Every format of ``status`` answers with one of its exit codes (an exception fails the test)."""
    for args in (("--long",), ("--format", "yaml", "--long")):
        code, _out = fs.status_here(root, *args)
        assert code in (0, 1, 2), args
    code, out = fs.status_here(root, "--format", "json", "--long")
    assert code in (0, 1, 2)
    return json.loads(out)


def case_id(inner: str, kind: str) -> str:
    short = inner.replace(IID, "instance").replace("/var/lib/cloudseed", "state").replace("/run/cloudseed", "run")
    return f"{short.strip('/')}-{kind.replace(' ', '-')}"


@pytest.mark.parametrize("inner, kind", CASES, ids=[case_id(f, k) for f, k in CASES])
def test_a_damaged_state_file_is_set_aside_and_the_boot_converges(root_after, clean_boot, inner, kind):
    table = RUN if inner in RUN else PERSISTENT
    wrong, warned_kinds = table[inner]
    root = root_after("network" if table is RUN else "boot")
    if table is PERSISTENT:
        fs.new_boot(root)
    damage(root, inner, kind, wrong)
    shown = status_never_crashes(root)
    if inner.endswith("status.json"):   # the status itself: an error that says so, not "not started"
        assert shown["status"] == "error" and "status.json) is damaged" in " ".join(shown["errors"]), shown

    stages = [("modules", "--mode", "config"), ("modules", "--mode", "final")] if table is RUN else [("boot",)]
    for stage in stages:
        proc = fs.agent(root, *stage)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr

    shown = status_never_crashes(root)
    named = [w for w in shown["warnings"] if f"state file {inner} is damaged" in w]
    if kind in warned_kinds:
        assert named and shown["extended_status"] == "degraded done", shown
        assert os.path.lexists(root.path_nofollow(f"{inner}.damaged-1"))        # kept for diagnosis
    else:
        assert shown["extended_status"] in ("done", "degraded done"), shown
    expected = dict(clean_boot["fingerprint"])
    found = fs.fingerprint(root)
    if inner == f"{IID}/sem":
        # the record of what ran for this instance is what was lost: its modules ran again (the one
        # append made again, the host keys made anew); all else as a clean boot leaves it
        assert found.pop("appended.log")["content"] == "appended once\n" * 2
        expected.pop("appended.log")
    assert found == expected
    assert fs.runs(root, fs.RUNCMD_LOG)[-1] is True


def test_a_status_file_of_every_shape_is_answered_never_crashed_on(root_after):
    root = root_after("boot")
    shapes = [b"", b"null", b"[]", b'"text"', b"{}", b'{"v1": null}', b'{"v1": {}}', b'{"v1": {"init": []}}',
              b'{"v1": {"init": {"start": "x"}}}', b'{"v1": {"modules-final": {"errors": [1]}}}', GARBAGE]
    for shape in shapes:
        with open(root.path("/run/cloudseed/status.json"), "wb") as handle:
            handle.write(shape)
        shown = status_never_crashes(root)
        # the boot's result record is still there: it gives the verdict, the damage a warning
        assert shown["extended_status"] == "degraded done", (shape, shown)
        os.unlink(root.path("/run/cloudseed/result.json")) if shape == GARBAGE else None
    shown = status_never_crashes(root)
    assert shown["status"] == "error" and "damaged" in shown["errors"][0], shown
    with open(root.path("/run/cloudseed/result.json"), "w") as handle:
        json.dump({"v1": "nothing"}, handle)
    assert status_never_crashes(root)["status"] == "error"
