"""Run by Debian's python3 with a reference cloud-init importable (see tests/reference.py).

Usage: reference_net_convert.py < JOBS_JSON
JOBS_JSON is a list of ``[argv, output_directory]``; each argv is what ``cloud-init devel
net-convert`` would be given (without ``-d``). cloud-init is imported once and every job runs
its net-convert handler in a forked child (one conversion cannot leak state into the next), which
is what the command does, minus a second of start-up per conversion. Prints one JSON list: per
job, ``null`` when it rendered, else the error it ended with.
"""

import json
import os
import sys
import traceback

from cloudinit.cmd.devel import net_convert


def run(argv, directory):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 0
        try:
            args = net_convert.get_parser().parse_args(argv + ["-d", directory])
            net_convert.handle_args("net-convert", args)
        except BaseException:  # the child reports everything, then exits
            os.write(write, traceback.format_exc()[-400:].encode())
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        error = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    return None if status == 0 else (error or f"exit status {status}")


def main():
    jobs = json.load(sys.stdin)
    print(json.dumps([run(argv, directory) for argv, directory in jobs]))


main()
