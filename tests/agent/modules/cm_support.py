"""Helpers of the configuration-management module tests (ansible, chef, mcollective, puppet, salt_minion).

``recorder`` puts a shell script in a ``shell_target`` root (busybox as /bin/sh) that appends its
name and arguments to /tmp/calls and then does what the test says (exit status, output): the
stand-in for a tool Debian's archive does not have (chef, salt) or that must not touch this
machine (apt-get, systemctl). ``serve`` is a real HTTP server on loopback with a random port;
``closed_port`` a port nothing listens on.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import socket
import threading


def recorder(root, name: str, body: str = "", status: int = 0, directory: str = "/usr/bin") -> None:
    """``directory/name``: records ``name args...`` in /tmp/calls, runs ``body``, exits ``status``."""
    root.makedirs(directory)
    root.makedirs("/tmp")
    script = f'#!/bin/sh\necho "{name} $*" >> /tmp/calls\n{body}\nexit {status}\n'
    root.write(f"{directory}/{name}", script, mode=0o755)


def calls(root) -> list[str]:
    return root.read_text("/tmp/calls", default="").splitlines()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(files: dict[str, bytes]):
    """Serve ``files`` (path -> body) on 127.0.0.1; yields the base URL and the list of paths asked."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the name http.server calls)
            asked.append(self.path)
            body = files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/x-shellscript")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # a client that hangs up early (a refused oversized body) is part of the tests

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def add_applets(root, *names: str) -> None:
    """More busybox applets in a ``shell_target`` root (chmod, sed, ...)."""
    import os

    for name in names:
        link = root.path(f"/bin/{name}")
        if not os.path.lexists(link):
            os.symlink("busybox", link)


def apt_recorder(root, failing: str = "") -> None:
    """A recording apt-get; installing ``failing`` fails the way apt-get says a package is unknown."""
    body = f'case " $* " in *" {failing} "*) echo "E: Unable to locate package {failing}" >&2; exit 100;; esac' \
        if failing else ""
    recorder(root, "apt-get", body)


# Debian's cloud-init 22.4 runs one of its cc_* modules (tests/reference.py): every file it writes
# lands under a temporary directory, every command and package install is recorded, not run.
REFERENCE_HARNESS = r'''
import json, logging, os, socket, sys
from cloudinit import subp, templater, util
name, args = sys.argv[1], json.loads(sys.argv[2])
top = args["root"]
def inside(path):
    path = str(path)
    return path if path.startswith(top) or not path.startswith("/") else top + path
real = {n: getattr(util, n) for n in ("write_file", "ensure_dir", "load_file", "load_text_file", "copy", "rename")
        if hasattr(util, n)}   # 24.x and later: load_text_file
util.write_file = lambda path, content, mode=0o644, *a, **k: real["write_file"](inside(path), content, mode=mode)
util.ensure_dir = lambda path, mode=None, *a, **k: real["ensure_dir"](inside(path), mode)
util.ensure_dirs = lambda paths, mode=None: [util.ensure_dir(p, mode) for p in paths]
def loader(name):
    def load_file(path, *a, **k):  # this system's os-release (the reference asks which OS it is on)
        own = path == "/etc/os-release" or str(path).startswith(args["templates"])
        return real[name](path if own else inside(path), *a, **k)
    return load_file
for _name in ("load_file", "load_text_file"):
    if _name in real:
        setattr(util, _name, loader(_name))
util.copy = lambda src, dest: real["copy"](inside(src), inside(dest))
util.rename = lambda src, dest: real["rename"](inside(src), inside(dest))
util.chownbyname = lambda *a, **k: None
ran = []
def fake_subp(cmd, *a, **k):
    ran.append([str(c) for c in cmd])
    return (args.get("stdout", {}).get(str(cmd[-1]), ""), "")
subp.subp = fake_subp
subp.is_exe = lambda path: False
socket.getfqdn = lambda *a: args.get("fqdn", "host.example.org")
module = __import__("cloudinit.config.cc_" + name, fromlist=["handle"])
if hasattr(module, "subp") and hasattr(module.subp, "__call__") and not hasattr(module.subp, "subp"):
    module.subp = fake_subp  # "from cloudinit.subp import subp"
if hasattr(module, "which"):
    module.which = lambda tool: "/usr/bin/" + tool
if args.get("installed"):   # every tool is there (24.x+ modules ask subp.which)
    subp.which = lambda tool, *a, **k: "/usr/bin/" + tool
class Distro:
    osfamily = "debian"
    pip_package_name = "python3-pip"
    def install_packages(self, pkgs):
        ran.append(["install"] + util.expand_package_list("%s=%s", pkgs))  # as apt's distro does
    def do_as(self, command, user, cwd=None, **kwargs):
        return fake_subp(["runuser", "-u", user, "--"] + list(command))
class Datasource:
    def get_instance_id(self):
        return "i-test"
class Cloud:
    distro = Distro()
    datasource = Datasource()
    def get_instance_id(self):
        return "i-test"
    def get_template_filename(self, name):
        return args["templates"] + "/" + name + ".tmpl"
import inspect
if len(inspect.signature(module.handle).parameters) == 5:   # 22.4: (name, cfg, cloud, log, args)
    module.handle(name, args["cfg"], Cloud(), logging.getLogger(), [])
else:                                                        # 23.x and later: (name, cfg, cloud, args)
    module.handle(name, args["cfg"], Cloud(), [])
print(json.dumps(ran))
'''


def reference_run(tmp_path, module: str, cfg: dict, oracle=None, **extra) -> tuple[str, list[list[str]]]:
    """Run cloud-init's ``cc_<module>.handle`` on ``cfg`` (22.4 unless ``oracle`` says which):
    (the directory it wrote under, its commands)."""
    import json
    from functools import partial

    from tests import reference

    oracle = oracle or reference.OLD
    reference_python, reference_tree = partial(reference.reference_python, oracle=oracle), oracle.tree

    top = tmp_path / "reference-root"
    top.mkdir(exist_ok=True)
    for inner, text in extra.pop("files", {}).items():
        path = top / inner.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    templates = os.path.join(reference_tree() or "", "etc", "cloud", "templates")
    proc = reference_python(REFERENCE_HARNESS, module, json.dumps(
        {"root": str(top), "cfg": cfg, "templates": templates, **extra}))
    return str(top), json.loads(proc.stdout.splitlines()[-1])
