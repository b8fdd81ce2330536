"""Every example every module declares: valid cloud-config, and it runs through the real framework.

Each example is checked against the merged schema (no error, no unknown key), then
run by its module in a temporary Debian root (a RHEL one for RHEL-only modules). It must succeed
and change the root (a file written, changed or removed), unless example_outcomes.yaml says why
it cannot there: then it must fail with exactly the reason listed, or succeed changing nothing
for the reason listed. A crash (any exception but a ``ModuleError``) is always a bug.
While an example runs nothing may leave the temporary root: a command not chrooted into it and
any connection to a non-loopback address are refused and reported, and each run has a time limit.
Modules added later are picked up from the package itself.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess

import pytest
import yaml

from cloudseed.agent.config.schema import validate_config
from cloudseed.agent.modules import all_module_names, load_module

SECONDS_PER_EXAMPLE = 60
with open(os.path.join(os.path.dirname(__file__), "example_outcomes.yaml")) as _handle:
    OUTCOMES = yaml.safe_load(_handle)
# the framework's own bookkeeping, not what the example did
BOOKKEEPING = ("/var/lib/cloudseed/instances/i-test/sem/", "/var/log/cloudseed")
SHELLS = ("sh", "bash", "dash", "busybox", "env", "nsenter", "sudo")


def _cases() -> list:
    cases = []
    for name in all_module_names():
        try:
            spec, _handle = load_module(name)
        except Exception as e:  # the contract test reports it by file; keep collecting the others
            cases.append(pytest.param(name, -1, "", id=f"{name}-unloadable", marks=pytest.mark.skip(reason=str(e))))
            continue
        for index, text in enumerate(getattr(spec, "examples", ()) or ()):
            cases.append(pytest.param(name, index, text, id=f"{name}-{index}"))
    return cases


CASES = _cases()


def _config(name: str, index: int, text: str) -> dict:
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as e:
        pytest.fail(f"{name} example {index} is not YAML: {e}")
    assert isinstance(cfg, dict), f"{name} example {index} is not a mapping"
    return cfg


@pytest.mark.parametrize("name,index,text", CASES)
def test_example_is_valid_cloud_config(name, index, text):
    cfg = _config(name, index, text)
    # errors and unknown keys (warnings) fail; an example may show a deprecated spelling on purpose
    problems = [p for p in validate_config(cfg, text) if p.level != "deprecated"]
    assert not problems, f"{name} example {index}:\n" + "\n".join(f"  {p.level}: {p}" for p in problems)
    spec, _handle = load_module(name)
    if spec.activate_by:
        assert any(key in cfg for key in spec.activate_by), \
            f"{name} example {index} sets none of the keys that activate the module ({', '.join(spec.activate_by)})"


def test_every_outcome_listed_names_a_declared_example():
    declared = {f"{name} {index}" for name, index, _text in (case.values for case in CASES)}
    listed = set(OUTCOMES["failures"]) | set(OUTCOMES["unchanged"])
    assert not listed - declared, f"example_outcomes.yaml lists undeclared examples: {sorted(listed - declared)}"
    assert not set(OUTCOMES["failures"]) & set(OUTCOMES["unchanged"])


class ExampleTimeout(BaseException):
    """Raised by the alarm: not an Exception, so the framework cannot record it as a module failure."""


def _loopback(host) -> bool:
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


def _inside(path: str, top: str) -> bool:
    return os.path.realpath(path) == top or os.path.realpath(path).startswith(top + os.sep)


@pytest.fixture
def confined(monkeypatch, target):
    """Refuse (and record) commands that could act on this machine; refuse connections off it.

    A command runs chrooted into the root (``TargetRoot.run``), or is a host tool whose every path
    argument is inside the root (the host's ssh-keygen making keys for an offline root). A
    connection to another machine is refused (phone_home may try; that is its job).
    """
    escapes: list[str] = []
    top = os.path.realpath(target.top)
    real_popen_init = subprocess.Popen.__init__

    def popen_init(self, args, *a, **kw):
        argv = [str(a) for a in ([args] if isinstance(args, (str, bytes)) else args)]
        paths = [arg for arg in argv[1:] if "/" in arg]
        into_root = bool(paths) and all(arg.startswith("/") and _inside(arg, top) for arg in paths)
        shell = kw.get("shell") or os.path.basename(argv[0]) in SHELLS
        if kw.get("preexec_fn") is None and not (into_root and not shell):
            escapes.append(f"command run outside the root: {args!r}")
            raise PermissionError(f"the example test refuses an unchrooted command: {args!r}")
        return real_popen_init(self, args, *a, **kw)

    real_connect = socket.socket.connect

    def connect(sock, address):
        host = address[0] if isinstance(address, tuple) else None
        if host is not None and not _loopback(host):
            raise ConnectionRefusedError(f"the example test refuses connections off this machine: {address!r}")
        return real_connect(sock, address)

    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, *a, **kw):
        if host is not None and not _loopback(host):
            try:
                ipaddress.ip_address(str(host).split("%")[0])
            except ValueError:
                raise socket.gaierror(socket.EAI_NONAME, f"the example test refuses name lookups: {host!r}") from None
        return real_getaddrinfo(host, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen_init)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    def alarm(_signum, _frame):
        raise ExampleTimeout(f"example still running after {SECONDS_PER_EXAMPLE}s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(SECONDS_PER_EXAMPLE)
    try:
        yield escapes
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("name,index,text", CASES)
def test_example_runs_in_a_temporary_root(name, index, text, target, confined):
    from tests.agent.modules.module_support import RHEL_OS_RELEASE, InputDatasource, run

    spec, _handle = load_module(name)
    if spec.distros and "debian" not in spec.distros:
        # run it on a system it is for: the RHEL family, or the first os-release ID it names
        first = spec.distros[0]
        target.write("/etc/os-release", RHEL_OS_RELEASE if "rhel" in spec.distros else f"ID={first}\n")
    assert not target.is_live
    cfg = _config(name, index, text)
    datasource = InputDatasource(local_hostname="example-host", metadata={"instance-id": "i-example"})
    before = _files(target.top)
    result, _ctx = run(target, name, cfg, datasource=datasource, stage=spec.stage)
    assert not confined, f"{name} example {index} reached outside its root: {confined}"
    assert not result.crash, f"{name} example {index} crashed: {result.reason}"
    case = f"{name} {index}"
    failure = OUTCOMES["failures"].get(case)
    if failure is not None:
        assert failure["cause"] in OUTCOMES["causes"], f"example_outcomes.yaml: {case}: unknown cause"
        expected = failure["reason"].replace("{root}", target.top)
        assert (result.status, result.reason) == ("failed", expected), \
            f"{name} example {index}: example_outcomes.yaml says it fails ({failure['cause']}) with that reason"
        return
    assert result.status == "ok", f"{name} example {index}: {result.status} ({result.reason})"
    after = _files(target.top)
    changed = sorted(path for path in set(before) | set(after)
                     if before.get(path) != after.get(path) and not path.startswith(BOOKKEEPING))
    why_nothing = OUTCOMES["unchanged"].get(case)
    if why_nothing is None:
        assert changed, f"{name} example {index} succeeded and changed nothing in the root"
    else:
        assert not changed, f"{name} example {index} changed {changed}; example_outcomes.yaml: {why_nothing}"


def _files(top: str) -> dict[str, tuple]:
    """Every file and link under ``top`` (path inside the root -> mode and content, or target)."""
    found = {}
    for directory, dirs, files in os.walk(top):
        inner = directory[len(top):] or "/"
        for name in files + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                found[os.path.join(inner, name)] = ("link", os.readlink(path))
            else:
                with open(path, "rb") as handle:
                    found[os.path.join(inner, name)] = ("file", os.stat(path).st_mode, handle.read())
    return found
