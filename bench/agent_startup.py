"""Benchmark: agent start-up and stage cost, beside Debian's cloud-init on the same machine.

Measures, each as the median of N fresh processes run with Debian's /usr/bin/python3 (as on a
guest, the package found on sys.path, no editable-install hooks):
  - cold start of ``cloudseed status`` vs ``cloud-init status``;
  - import time of the local stage's code path (``python -X importtime``: the cumulative time
    of every top-level import made by ``cloudseed init --local``) vs ``import cloudinit.cmd.main``;
  - the four stages from a NoCloud seed in a temporary root, seconds per stage from status.json;
  - a whole boot in a temporary root: four stage processes against one (``cloudseed boot``);
  - the generator's decision: the POSIX shell generator against the Python one.
Targets: boot-path import <= 50 ms, ``status`` <= 80 ms.

Run: .venv/bin/python bench/agent_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
sys.path.insert(0, PROJECT)  # run as a script: the tests package (the reference cloud-init) of this checkout


def clean_env(pythonpath: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = pythonpath
    return env


def wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm-up, writes .pyc
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def _top_level_import_us(code: str, env: dict[str, str]) -> int:
    """Summed cumulative time of the top-level entries of ``python -X importtime -c code``."""
    proc = subprocess.run([PY, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True)
    total = 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        # nesting shows as two extra spaces before the name; a top-level entry has exactly one
        if cumulative.strip().isdigit() and name.startswith(" ") and not name.startswith("  "):
            total += int(cumulative)
    return total


def import_ms(code: str, env: dict[str, str], runs: int) -> float:
    """Median import cost of ``code`` in ms, over what interpreter start-up already imports."""
    _top_level_import_us(code, env)  # warm-up: byte-compile once, as an installed package is
    base = statistics.median(_top_level_import_us("pass", env) for _ in range(runs))
    cost = statistics.median(_top_level_import_us(code, env) for _ in range(runs))
    return (cost - base) / 1000


def make_seed_root() -> str:
    top = tempfile.mkdtemp(prefix="cloudseed-bench-")
    os.makedirs(f"{top}/etc/cloudseed/cloud.cfg.d")
    os.makedirs(f"{top}/var/lib/cloud/seed/nocloud")
    shutil.copy("/etc/passwd", f"{top}/etc/passwd")
    shutil.copy("/etc/group", f"{top}/etc/group")
    with open(f"{top}/etc/os-release", "w") as f:
        f.write('ID=debian\nVERSION_ID="12"\n')
    with open(f"{top}/etc/cloudseed/cloud.cfg.d/00-bench.cfg", "w") as f:
        f.write("network: {config: disabled}\nusers: []\n")
    with open(f"{top}/var/lib/cloud/seed/nocloud/meta-data", "w") as f:
        f.write("instance-id: iid-bench\nlocal-hostname: bench\n")
    with open(f"{top}/var/lib/cloud/seed/nocloud/user-data", "w") as f:
        f.write("#cloud-config\nwrite_files:\n" + "".join(
            f"  - path: /etc/bench/{i}.conf\n    content: value {i}\n" for i in range(3)))
    return top


def stage_seconds(runs: int, env: dict[str, str]) -> dict[str, float]:
    per_stage: dict[str, list[float]] = {}
    for _ in range(runs):
        top = make_seed_root()
        try:
            for argv in (["init", "--local"], ["init"], ["modules", "--mode", "config"],
                         ["modules", "--mode", "final"]):
                subprocess.run([PY, "-m", "cloudseed", "--root", top, *argv], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(f"{top}/run/cloudseed/status.json") as f:
                v1 = json.load(f)["v1"]
            for key in ("init-local", "init", "modules-config", "modules-final"):
                record = v1[key]
                per_stage.setdefault(key, []).append(record["finished"] - record["start"])
        finally:
            shutil.rmtree(top, ignore_errors=True)
    return {k: round(statistics.median(v) * 1000, 1) for k, v in per_stage.items()}


def boot_wall_ms(runs: int, env: dict[str, str]) -> dict[str, float]:
    """Wall time of a whole boot in a temporary root: four stage processes against ``boot`` (one)."""
    ways = {"four_processes": [["init", "--local"], ["init"], ["modules", "--mode", "config"],
                               ["modules", "--mode", "final"]],
            "one_process": [["boot"]]}
    out = {}
    for name, steps in ways.items():
        samples = []
        for _ in range(runs):
            top = make_seed_root()
            try:
                start = time.perf_counter()
                for argv in steps:
                    subprocess.run([PY, "-m", "cloudseed", "--root", top, *argv], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                samples.append(time.perf_counter() - start)
            finally:
                shutil.rmtree(top, ignore_errors=True)
        out[name] = round(statistics.median(samples) * 1000, 1)
    return out


def generator_ms(runs: int, env: dict[str, str]) -> dict[str, float]:
    """The generator's decision (a machine where no datasource can exist, and one with a seed):
    the POSIX shell generator the units use against ``cloudseed generator`` (Python)."""
    shell = os.path.join(PROJECT, "cloudseed", "data", "systemd", "cloudseed-generator")
    out = {}
    for kind in ("nothing", "seed"):
        top = make_seed_root()
        if kind == "nothing":
            shutil.rmtree(f"{top}/var/lib/cloud/seed")
            os.remove(f"{top}/etc/cloudseed/cloud.cfg.d/00-bench.cfg")
        try:
            shell_env = {**env, "CLOUDSEED_ROOT": top}
            out[f"shell_{kind}"] = round(wall(["/bin/sh", shell, f"{top}/gen"], shell_env, runs), 1)
            out[f"python_{kind}"] = round(wall([PY, "-m", "cloudseed", "--root", top, "generator", "/gen"], env,
                                               runs), 1)
        finally:
            shutil.rmtree(top, ignore_errors=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    ours = clean_env(PROJECT)
    results: dict[str, object] = {"python": PY, "runs": args.runs}
    results["python_startup_ms"] = round(wall([PY, "-c", "pass"], ours, args.runs), 1)
    results["cloudseed_status_ms"] = round(wall([PY, "-m", "cloudseed", "status"], ours, args.runs), 1)
    results["cloudseed_version_ms"] = round(wall([PY, "-m", "cloudseed", "--version"], ours, args.runs), 1)
    local_path = "import cloudseed.cli, cloudseed.agent.boot.stages, cloudseed.agent.datasources.nocloud"
    results["cloudseed_local_import_ms"] = round(import_ms(local_path, ours, args.runs), 1)
    from tests.reference import reference_tree

    tree = reference_tree()
    if tree:
        ref = clean_env(os.path.join(tree, "usr", "lib", "python3", "dist-packages"))
        results["reference_status_ms"] = round(
            wall([PY, os.path.join(tree, "usr", "bin", "cloud-init"), "status"], ref, args.runs), 1)
        results["reference_import_ms"] = round(import_ms("import cloudinit.cmd.main", ref, args.runs), 1)
    results["stage_ms"] = stage_seconds(max(3, args.runs // 3), ours)
    results["boot_wall_ms"] = boot_wall_ms(max(3, args.runs // 3), ours)
    results["generator_ms"] = generator_ms(args.runs, ours)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
