"""The server's C fast path under AddressSanitizer and UBSan, on demand (not in CI).

    .venv/bin/python bench/fast_path_memcheck.py [--seconds 120]

Copies this checkout (tracked and new files) to a temporary tree, builds ``_fast_path`` there
with ``-fsanitize=address,undefined``, and runs in that tree, with the matching libasan
preloaded into every Python process (``PYTHONMALLOC=malloc``, so Python's own objects are checked
too; leak detection off: the interpreter keeps memory at exit on purpose):
tests/provider/server/test_fast_path.py, tests/fuzz/test_fuzz_fast_path.py, and the differential
fuzz streams (tests/fuzz/fast_path_streams.py) for ``--seconds``. Prints each sanitizer report's
summary and exits 1 if there is any (or if a run failed).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
ENGINE = os.path.join("cloudseed", "provider", "server", "engine")


def copy_tree(target: str) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = os.path.join(ROOT, name)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(target, name)), exist_ok=True)
            shutil.copy2(source, os.path.join(target, name))


def build(tree: str) -> str:
    engine = os.path.join(tree, ENGINE)
    module = os.path.join(engine, "_fast_path" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=undefined", "-Wall", "-shared", "-fPIC",
                    "-I" + sysconfig.get_paths()["include"], "-o", module,
                    os.path.join(engine, "fast_path.c"), os.path.join(engine, "fast_path_answer.c")], check=True)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120, help="of differential fuzz streams")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix=f"fast-path-memcheck-{os.getpid()}-") as tmp:
        tree, reports = os.path.join(tmp, "tree"), os.path.join(tmp, "reports")
        os.makedirs(reports)
        copy_tree(tree)
        module = build(tree)
        libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        env = dict(os.environ, LD_PRELOAD=libasan, PYTHONMALLOC="malloc",
                   ASAN_OPTIONS=f"detect_leaks=0:log_path={reports}/asan:halt_on_error=1",
                   UBSAN_OPTIONS=f"print_stacktrace=1:log_path={reports}/ubsan")
        check = "from cloudseed.provider.server.engine import _fast_path; print(_fast_path.__file__)"
        loaded = subprocess.run([sys.executable, "-c", check], cwd=tree, env=env, capture_output=True, text=True)
        if loaded.stdout.strip() != module:
            print(f"the sanitized module is not the one loaded: {loaded.stdout}{loaded.stderr}")
            return 1
        runs = [[sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "tests/provider/server/test_fast_path.py", "tests/fuzz/test_fuzz_fast_path.py"],
                [sys.executable, "tests/fuzz/fast_path_streams.py", "--seed", str(os.getpid()),
                 "--seconds", str(args.seconds), "--failures", os.path.join(tmp, "failures")]]
        failed = False
        for run in runs:
            print("$", " ".join(run[1:]), flush=True)
            result = subprocess.run(run, cwd=tree, env=env, capture_output=True, text=True)
            print(result.stdout[-1500:].strip())
            if result.returncode != 0:
                failed = True
                print(result.stderr[-3000:])
        found = sorted(glob.glob(os.path.join(reports, "*")))
        for path in found:
            with open(path, errors="replace") as handle:
                text = handle.read()
            summary = [line for line in text.splitlines() if "SUMMARY" in line or "runtime error" in line]
            print(f"{os.path.basename(path)}: " + ("\n  ".join(summary[:10]) or text[:2000]))
        print(f"sanitizer reports: {len(found)}")
        return 1 if found or failed else 0


if __name__ == "__main__":
    sys.exit(main())
