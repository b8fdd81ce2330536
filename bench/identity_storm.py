"""Boot storm of new EC2 instances with and without the signed identity leaves.

    .venv/bin/python bench/identity_storm.py [--storm 2000] [--rounds 3] [--tree DIR]

Each storm is ``--storm`` instances nobody has asked about yet (new to the server: nothing cached,
nothing signed), all starting at one instant, each making cloud-init 22.4's IMDSv2 boot sequence
on a new connection per request (bench/server_bench.py ``EC2_BOOT``, C client). "signed" is that
sequence as cloud-init makes it, ending with ``dynamic/instance-identity/{pkcs7, signature,
rsa2048}``; "unsigned" is the same storm with those three requests reading the unsigned
``document`` instead (as many requests, no signing). The two alternate for ``--rounds`` rounds on
fresh instances each time, and the medians are compared: the target is signed <= 1.2 x unsigned.
``--tree`` runs the server of another source tree (an older revision, which signed with one
``openssl`` process per instance).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import server_bench  # noqa: E402
import server_storm  # noqa: E402

SIGNED = server_bench.EC2_BOOT
# the same requests, the three signed leaves read as the (unsigned) document instead
UNSIGNED = [(method, path.rsplit("/", 1)[0] + "/document") if path.endswith(("/pkcs7", "/signature", "/rsa2048"))
            else (method, path) for method, path in SIGNED]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storm", type=int, default=2000, help="instances per storm")
    parser.add_argument("--rounds", type=int, default=3, help="signed and unsigned storms, alternating")
    parser.add_argument("--tree", default=ROOT, help="run the server from this source tree")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="cloudseed-identity-storm-")
    try:
        db = os.path.join(tmp, "server.db")
        total = args.storm * args.rounds * 2 + 1
        started = time.monotonic()
        # registered by the served tree's own code (an older tree reads only its own schema)
        subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'bench'); import server_bench; "
                        f"server_bench.populate({db!r}, {total})"], cwd=args.tree, check=True,
                       env=dict(os.environ, PYTHONPATH=os.path.abspath(args.tree)))
        print(f"registering {total} instances: {time.monotonic() - started:.1f}s", flush=True)
        port = server_bench.free_port()
        settings = os.path.join(tmp, "server.yaml")
        with open(settings, "w") as handle:
            handle.write("rate_limit: 0\n")
        server = subprocess.Popen([sys.executable, "-m", "cloudseed", "serve", "--db", db, "--listen",
                                   f"127.0.0.1:{port}", "--access-log", "", "--config", settings],
                                  cwd=args.tree, stderr=subprocess.DEVNULL,
                                  env=dict(os.environ, PYTHONPATH=os.path.abspath(args.tree)))
        times: dict[str, list[float]] = {"unsigned": [], "signed": []}
        try:
            server_bench.wait_port(port)
            time.sleep(1.0)
            # the registry's identity key is made on the first signed request: not in any storm
            server_storm.boot_storm_c(port, [server_bench.address_of(total - 1)], SIGNED, False, tmp)
            next_instance = 1
            for round_ in range(args.rounds):
                for name, sequence in (("unsigned", UNSIGNED), ("signed", SIGNED)) if round_ % 2 == 0 else (
                        ("signed", SIGNED), ("unsigned", UNSIGNED)):
                    sources = [server_bench.address_of(next_instance + n) for n in range(args.storm)]
                    next_instance += args.storm
                    with server_bench.Busy(server.pid) as busy:
                        storm = server_storm.boot_storm_c(port, sources, sequence, False, tmp)
                    times[name].append(storm["last_done_s"])
                    print(f"round {round_ + 1} {name}: {storm['instances']} new instances x {storm['requests_each']} "
                          f"requests, last finished after {storm['last_done_s']:.2f}s (median "
                          f"{storm['median_boot_s']:.2f}s), failures {storm['failures']}  ({busy.text})", flush=True)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait()
        signed, unsigned = statistics.median(times["signed"]), statistics.median(times["unsigned"])
        print(f"median: signed {signed:.2f}s, unsigned {unsigned:.2f}s: {signed / unsigned:.2f}x (target <= 1.2x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
