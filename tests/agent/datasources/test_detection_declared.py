"""Detection declared once: the shell generator is what the declarations make, and it decides as
the Python detection does on machines derived from those declarations.

Every top-level fact of every datasource's ``detection`` gets machines built from it: one where it
holds (for each alternative: each pattern, each path, each branch of an AnyOf) and near misses
where it does not (a letter missing, a character more, the other case where case counts, a
directory where a file is wanted, the setting absent...). On each, the generated shell script and
``cloudseed generator``'s code decide; they must agree, the Python one must (or must not) find
the datasource, and when the shell decides its reason must be one of the Python's. Facts about
filesystems get real devices (loop devices: root only); facts about the host (its floppy) cannot
be faked and are left to the hand-written cases of ``tests/agent/test_generator_shell.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from cloudseed.agent.boot.generator_shell import COMMAND, SCRIPT, generated_script
from cloudseed.agent.config import BUILTIN
from cloudseed.agent.datasources import DatasourceContext, _facts, datasource_class
from cloudseed.agent.state import Paths
from cloudseed.commands.generator import ON_DROPIN
from cloudseed.core.root import TargetRoot
from tests.agent.datasources.diskimages import loop_device, make_iso, make_vfat

LISTED = [n for n in BUILTIN["datasource_list"] if not datasource_class(n).fallback]
CLASSES = [datasource_class(n) for n in LISTED]
# the escape hatches: what data cannot say, written for Python and the shell (a new one is a
# conscious decision: add it here with machines where it holds and where it does not)
HATCHES = {
    "nocloud_network_seedfrom": ("NoCloud", [{"cmdline": "ds=nocloud;s=http://10.0.0.1/"}],
                                 [{"cmdline": "ds=nocloud;s=/srv/seed/"}, {}]),
    "nocloud_network_argument": ("NoCloud", [{"cmdline": "ds=nocloud-net"}],
                                 [{"cmdline": "ds=nocloud"}, {"cmdline": "ds=nocloud-nt"}]),
    "ibm_provisioning_boot": ("IBMCloud", [{"root/provisioningConfiguration.cfg": "x"},
                                           {"root/provisioningConfiguration.cfg": "x", "proc/1/environ": ("old", ""),
                                            "root/swinstall.log": ""}],
                              [{}, {"root/provisioningConfiguration.cfg": "x", "proc/1/environ": "",
                                    "root/swinstall.log": ("old", "")}]),
    "vmx_guestinfo_environment": ("VMware", [{"env": {"VMX_GUESTINFO": "1", "VMX_GUESTINFO_USERDATA": "I2Nsb3Vk"}}],
                                  [{"env": {"VMX_GUESTINFO_USERDATA": "x"}},
                                   {"env": {"VMX_GUESTINFO": "1", "VMX_GUESTINFO_METADATA": "---  "}}]),
}


def test_the_committed_script_is_what_the_declarations_generate():
    with open(SCRIPT) as f:
        current = f.read()
    assert generated_script(current) == current, (
        f"{SCRIPT}: its platform section is not what the datasources' declared detection generates; "
        f"run: {COMMAND}")


def test_the_escape_hatches_are_these():
    found = {leaf.name: cls.name for cls in CLASSES for fact in cls.detection for leaf in _facts.leaves(fact)
             if isinstance(leaf, _facts.Hatch)}
    assert found == {name: owner for name, (owner, _, _) in HATCHES.items()}


# ------------------------------------------------------------------ machines from declarations
class Machine:
    """Files of a fake root (path -> text, or (kind, text) with kind dir/socket/exec/noexec/old),
    kernel command line words, environment, datasource settings and a datasource_list."""

    def __init__(self, files=None, cmdline=(), env=None, settings=None, listed=None, same=None):
        self.files = dict(files or {})
        self.same = same  # DmiSame: (first, second, nocase, holds), set from the machine it joins
        self.cmdline = list(cmdline)
        self.env = dict(env or {})
        self.settings = {k: dict(v) for k, v in (settings or {}).items()}
        self.listed = listed

    def merge(self, other: Machine) -> Machine | None:
        """Both machines' facts in one, None when they disagree about a file."""
        files = dict(self.files)
        if other.same:
            first, second, nocase, holds = other.same
            a = files.get(f"sys/class/dmi/id/{first}", "Same-Value\n").strip()
            b = (a.swapcase() if nocase else a) if holds else a + "0"
            other = Machine({f"sys/class/dmi/id/{first}": a + "\n", f"sys/class/dmi/id/{second}": b + "\n"})
        for path, spec in other.files.items():
            if path in files and files[path] != spec:
                return None
            files[path] = spec
        settings = {k: dict(v) for k, v in self.settings.items()}
        for name, section in other.settings.items():
            settings.setdefault(name, {}).update(section)
        return Machine(files, self.cmdline + other.cmdline, {**self.env, **other.env}, settings,
                       other.listed if other.listed is not None else self.listed)

    def configured(self) -> bool:
        return bool(self.settings) or self.listed is not None

    def describe(self) -> str:
        parts = [f"{p}={s!r}" for p, s in sorted(self.files.items())]
        parts += [f"cmdline={' '.join(self.cmdline)!r}"] if self.cmdline else []
        parts += [f"env={self.env}"] if self.env else []
        parts += [f"datasource={self.settings}"] if self.settings else []
        parts += [f"datasource_list={self.listed}"] if self.listed is not None else []
        return "; ".join(parts) or "nothing"


def sample(pattern: str) -> str:
    """A text the glob ``pattern`` matches."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[":
            end = pattern.index("]", i)
            out.append(pattern[i + 1])
            i = end
        else:
            out.append({"*": "x", "?": "q"}.get(c, c))
        i += 1
    return "".join(out)


def near_misses(fact, pattern: str) -> list[str]:
    """Texts close to ``pattern`` that none of the fact's patterns matches."""
    literal = [i for i, c in enumerate(pattern) if c not in "*?[]" and not _in_set(pattern, i)]
    candidates = []
    if literal:
        i = literal[-1]
        candidates.append(sample(pattern[:i] + pattern[i + 1:]))  # its last plain character left out
    text = sample(pattern)
    letters = [i for i in literal if pattern[i].isalpha()]
    if letters and not fact.nocase:
        i = letters[0]
        flipped = pattern[:i] + pattern[i].swapcase() + pattern[i + 1:]
        candidates.append(sample(flipped))
    candidates += ["x" + text, text + "x"]
    wanted = [c for c in dict.fromkeys(candidates) if c and not _facts._matches(fact.patterns, c, fact.nocase)]
    return wanted[:2]


def _in_set(pattern: str, index: int) -> bool:
    return pattern.rfind("[", 0, index) > pattern.rfind("]", 0, index)


def _value_machine(fact, text: str) -> Machine:
    if isinstance(fact, _facts.Cmdline):
        return Machine(cmdline=["quiet", text, "ro"] if fact.tokens else [text])
    if isinstance(fact, _facts.Dmi):
        return Machine({f"sys/class/dmi/id/{fact.field}": (f"other {text}" if fact.tokens else text) + "\n"})
    path = fact.path.replace("/*/", "/00:01/").lstrip("/")
    return Machine({path: f"{text}\n"})


def positives(fact, name: str) -> list[Machine]:
    """Machines where ``fact`` holds, one per alternative ([]: none can be faked here)."""
    if isinstance(fact, (_facts.Dmi, _facts.Cmdline, _facts.FileText)):
        if getattr(fact, "host", False):
            return []
        return [_value_machine(fact, sample(p).swapcase() if fact.nocase else sample(p)) for p in fact.patterns]
    if isinstance(fact, _facts.Path):
        if fact.host:
            return []
        spec = {"file": "x\n", "exists": "x\n", "dir": ("dir", ""), "socket": ("socket", ""),
                "executable": ("exec", "#!/bin/sh\n"), "nonempty": None}[fact.kind]
        out = []
        for path in fact.paths:
            for inner in [f"{path}/{n}" for n in fact.inside[:1]] or [path]:
                files = {inner.lstrip("/") + "/x": "x\n"} if spec is None else {inner.lstrip("/"): spec}
                out.append(Machine(files))
        for inner in fact.inside[1:]:
            out.append(Machine({f"{fact.paths[0]}/{inner}".lstrip("/"): spec or "x\n"}))
        return out
    if isinstance(fact, _facts.DmiSame):
        return [Machine(same=(fact.first, fact.second, fact.nocase, True))]  # made when joined
    if isinstance(fact, _facts.Setting):
        values = [sample(p).swapcase() if fact.nocase else sample(p) for p in fact.patterns] or ["http://10.0.0.1/"]
        return [Machine(settings={name: {fact.key: value}}) for value in values]
    if isinstance(fact, _facts.Listed):
        return [Machine()]
    if isinstance(fact, _facts.Hatch):
        return [_hatch_machine(spec) for spec in HATCHES[fact.name][1]]
    if isinstance(fact, _facts.Not):
        return [Machine()]
    if isinstance(fact, _facts.AnyOf):
        return [m for f in fact.facts for m in positives(f, name)]
    if isinstance(fact, _facts.AllOf):
        return _all_of([positives(f, name) for f in fact.facts])
    return []  # a Disk: real devices, below


def negatives(fact, name: str) -> list[Machine]:
    """Near misses: machines close to ``fact`` where it does not hold."""
    if isinstance(fact, (_facts.Dmi, _facts.Cmdline, _facts.FileText)):
        if getattr(fact, "host", False):
            return [Machine()]  # this host's own state (checked before use)
        return [_value_machine(fact, text) for p in fact.patterns for text in near_misses(fact, p)]
    if isinstance(fact, _facts.Path):
        if fact.host:
            return [Machine()]
        path = (f"{fact.paths[0]}/{fact.inside[0]}" if fact.inside else fact.paths[0]).lstrip("/")
        wrong = {"file": {path: ("dir", "")}, "dir": {path: "x\n"}, "socket": {path: "x\n"},
                 "executable": {path: ("noexec", "#!/bin/sh\n")}, "nonempty": {path: ("dir", "")},
                 "exists": {path + ".d/x": "x\n"}}[fact.kind]
        if fact.inside:
            wrong = {**wrong, f"{fact.paths[0]}/{fact.inside[0]}.x".lstrip("/"): "x\n"}
        return [Machine(wrong)]
    if isinstance(fact, _facts.DmiSame):
        return [Machine(same=(fact.first, fact.second, fact.nocase, False))]
    if isinstance(fact, _facts.Setting):
        if not fact.patterns:
            return [Machine(settings={name: {fact.key: ""}})]
        return [Machine(settings={name: {fact.key: text}}) for p in fact.patterns for text in near_misses(fact, p)] \
            or [Machine(settings={name: {"unrelated": "x"}})]
    if isinstance(fact, _facts.Listed):
        return [Machine(listed=[n for n in BUILTIN["datasource_list"] if n != fact.name])]
    if isinstance(fact, _facts.Hatch):
        return [_hatch_machine(spec) for spec in HATCHES[fact.name][2]]
    if isinstance(fact, _facts.Not):
        return positives(fact.fact, name)
    if isinstance(fact, _facts.AnyOf):
        return _all_of([negatives(f, name)[:1] for f in fact.facts])
    if isinstance(fact, _facts.AllOf):
        out = []
        for index, child in enumerate(fact.facts):
            rest = [positives(f, name)[:1] for i, f in enumerate(fact.facts) if i != index]
            out += _all_of([negatives(child, name), *rest])
        return out
    return []


def _all_of(choices: list[list[Machine]]) -> list[Machine]:
    """Machines joining one machine of each list: every alternative of each list once, with the
    first of the others (pairs that disagree about a file are left out)."""
    if any(not c for c in choices):
        return []
    out = []
    for index, options in enumerate(choices):
        for option in options if index == 0 else options[1:]:
            machine: Machine | None = Machine()
            for i, c in enumerate(choices):
                machine = machine and machine.merge(option if i == index else c[0])
            if machine is not None:
                out.append(machine)
    return out


def _hatch_machine(spec: dict) -> Machine:
    spec = dict(spec)
    return Machine({k: v for k, v in spec.items() if k not in ("cmdline", "env")},
                   spec.get("cmdline", "").split(), spec.get("env"))


def has_disk(fact) -> bool:
    return any(leaf.disk for leaf in _facts.leaves(fact))


def cases() -> list:
    out = []
    for cls in CLASSES:
        for number, fact in enumerate(cls.detection, 1):
            if has_disk(fact):
                continue
            for kind, machines in (("holds", positives(fact, cls.name)), ("near miss", negatives(fact, cls.name))):
                for index, machine in enumerate(machines, 1):
                    machine = Machine().merge(machine)  # (what a DmiSame leaves to the machine it joins)
                    out.append(pytest.param(cls.name, fact, machine, kind == "holds",
                                            id=f"{cls.name}[{number}] {kind} {index}"))
    return out


# ------------------------------------------------------------------ running both generators
def build(top: str, machine: Machine) -> str:
    root = os.path.join(top, "root")
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    for inner, spec in machine.files.items():
        kind, text = spec if isinstance(spec, tuple) else ("file", spec)
        path = os.path.join(root, inner)
        if kind == "dir":
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if kind == "socket":
            here = os.getcwd()
            os.chdir(os.path.dirname(path))  # a socket's path is limited to 108 bytes: bind a relative one
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.bind(os.path.basename(path))
                sock.close()
            finally:
                os.chdir(here)
            continue
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755 if kind == "exec" else 0o644)
        if kind == "old":
            old = time.time() - 3600
            os.utime(path, (old, old))
    if machine.cmdline:
        with open(_mkfile(root, "etc/cloudseed/cmdline"), "w") as f:
            f.write(" ".join(machine.cmdline) + "\n")
    if machine.configured():
        import yaml

        cfg = {"datasource": machine.settings} if machine.settings else {}
        if machine.listed is not None:
            cfg["datasource_list"] = machine.listed
        with open(_mkfile(root, "etc/cloudseed/cloud.cfg.d/50-case.cfg"), "w") as f:
            yaml.safe_dump(cfg, f)
    return root


def _mkfile(root: str, inner: str) -> str:
    path = os.path.join(root, inner)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def run_shell(root: str, out: str, env: dict[str, str]) -> dict:
    """The shell generator's verdict; ``{"handed_off": True}`` when it asked the Python one."""
    recorder = os.path.join(os.path.dirname(root), "python-generator")
    with open(recorder, "w") as f:
        f.write('#!/bin/sh\ntouch "$2/handed-off"\n')
    os.chmod(recorder, 0o755)
    shutil.rmtree(os.path.join(root, "run"), ignore_errors=True)
    proc = subprocess.run(["/bin/sh", SCRIPT, out], capture_output=True, text=True, timeout=60,
                          env={"CLOUDSEED_ROOT": root, "CLOUDSEED_BIN": recorder, "PATH": os.environ["PATH"], **env})
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    if os.path.exists(os.path.join(root, "handed-off")):
        os.remove(os.path.join(root, "handed-off"))
        return {"handed_off": True}
    return _verdict(root, os.path.isfile(os.path.join(out, ON_DROPIN)))


def run_python(root: str, out: str) -> dict:
    """``cloudseed generator``'s verdict (its own code, in this process)."""
    from cloudseed.commands import generator

    shutil.rmtree(os.path.join(root, "run"), ignore_errors=True)
    assert generator.run(argparse.Namespace(root=root, normal_dir=out, debug=False)) == 0
    return _verdict(root, os.path.isfile(root + os.path.join(out, ON_DROPIN)))


def _verdict(root: str, linked: bool) -> dict:
    run = os.path.join(root, "run/cloudseed")
    if os.path.exists(os.path.join(run, "enabled")):
        with open(os.path.join(run, "enabled")) as f:
            verdict = json.load(f)
        assert linked
        return verdict
    assert not linked
    with open(os.path.join(run, "disabled")) as f:
        return {"enabled": False, "reason": f.read().strip()}


def agree(name: str, fact, machine: Machine, root: str, tmp: str, expect: bool | None, monkeypatch) -> None:
    """Both generators decide alike on ``root``; the fact holds (``expect``) or not, and then the
    datasource is possible (or not, unless another of its facts holds there); ``expect`` None:
    only the agreement is checked."""
    from cloudseed.agent.config import load_system_config, read_cmdline

    for key, value in machine.env.items():
        monkeypatch.setenv(key, value)
    python = run_python(root, "/run/gen")
    shell = run_shell(root, os.path.join(tmp, "shell-out"), machine.env)
    possible = [n for n, _ in python.get("datasources", [])]
    where = f"{name} on {machine.describe()}: python {python}, shell {shell}"
    target = TargetRoot(root)
    cmdline = read_cmdline(target)
    cfg = load_system_config(target, cmdline)
    cls = datasource_class(name)

    def holding(facts) -> bool:
        return any(f.value(DatasourceContext(target, cfg, cmdline, Paths(target), stage), name) is not None
                   for f in facts for stage in (f.stages or cls.stages))

    if expect is not None:
        assert holding([fact]) == expect, where
        others = holding([f for f in cls.detection if f is not fact])
        assert (name in possible) == (expect or others), where
    if machine.configured():
        assert shell == {"handed_off": True}, where  # configuration is the Python generator's
        return
    assert shell["enabled"] == python["enabled"], where
    if shell["enabled"]:
        item = shell["reason"].split(": ", 1)[1]
        items = [f"{n} ({why})" for n, why in python["datasources"]]
        assert item in items, where
    else:
        assert shell["reason"] == python["reason"], where


@pytest.mark.parametrize("name,fact,machine,expect", cases())
def test_shell_and_python_decide_alike_on_declared_machines(tmp_path, monkeypatch, name, fact, machine, expect):
    if not expect and not machine.configured():
        ctx = DatasourceContext(TargetRoot(str(tmp_path / "empty")), {}, "", Paths(TargetRoot("/")), "local")
        host = [leaf for leaf in _facts.leaves(fact) if getattr(leaf, "host", False)]
        if any(leaf.value(ctx, name) is not None for leaf in host):
            pytest.skip("this host has what the near miss leaves out")
    agree(name, fact, machine, build(str(tmp_path), machine), str(tmp_path), expect, monkeypatch)


@pytest.mark.parametrize("hatch", sorted(HATCHES))
def test_each_hatch_decides_alike_in_both_languages(tmp_path, monkeypatch, hatch):
    """A hatch's shell condition against its Python function, alone, on its own machines."""
    owner, holds, misses = HATCHES[hatch]
    cls = datasource_class(owner)
    leaf = next(leaf for fact in cls.detection for leaf in _facts.leaves(fact)
                if isinstance(leaf, _facts.Hatch) and leaf.name == hatch)
    for index, (spec, expected) in enumerate([(s, True) for s in holds] + [(s, False) for s in misses]):
        machine = _hatch_machine(spec)
        root = build(str(tmp_path / f"m{index}"), machine)
        for key in ("VMX_GUESTINFO", "VMX_GUESTINFO_METADATA", "VMX_GUESTINFO_USERDATA"):
            monkeypatch.delenv(key, raising=False)
        for key, value in machine.env.items():
            monkeypatch.setenv(key, value)
        ctx = DatasourceContext(TargetRoot(root), {}, " ".join(machine.cmdline), Paths(TargetRoot(root)),
                                (leaf.stages or cls.stages)[-1])
        assert bool(leaf.python(ctx)) == expected, (hatch, machine.describe())
        if leaf.shell is None:
            continue
        proc = subprocess.run(["/bin/sh", "-c", f'root="$1"; value=; {{ {leaf.shell}; }} && echo "yes $value"',
                               "sh", root], capture_output=True, text=True, env={"PATH": os.environ["PATH"],
                                                                                  **machine.env})
        assert proc.stdout.startswith("yes") == expected, (hatch, machine.describe(), proc.stdout, proc.stderr)


def test_the_declared_machines_cover_every_fact():
    """Each fact the fake roots can show has a machine where it holds and one where it does not."""
    uncovered = []
    for cls in CLASSES:
        for number, fact in enumerate(cls.detection, 1):
            if has_disk(fact) or any(getattr(leaf, "host", False) for leaf in _facts.leaves(fact)):
                continue
            if not positives(fact, cls.name) or not negatives(fact, cls.name):
                uncovered.append(f"{cls.name}[{number}]")
    assert uncovered == []


# ------------------------------------------------------------------ facts about filesystems: real devices
def disk_machines(fact, name: str) -> list[tuple[Machine, dict, bool | None]]:
    """``(machine, device, holds)`` for a fact with Disk leaves: each Disk alternative on a device
    made for it, with the rest of its branch holding; then near misses: another label, a filesystem
    type no Disk leaf takes (the fact must not hold), the rest of the branch not holding (must not
    hold when the branch is the whole fact), another UUID (``None``: only the generators' agreement
    is checked, as another alternative may hold)."""
    out: list[tuple[Machine, dict, bool | None]] = []
    leaves = [leaf for leaf in _facts.leaves(fact) if leaf.disk]
    for machine, disk, misses in _disk_paths(fact, name):
        fstype = "vfat" if (disk.uuid or disk.uuid_not) and "vfat" in disk.fstypes else disk.fstypes[0]
        device = {"fstype": fstype, "label": sample(disk.labels[0]) if disk.labels[0] != "*" else "anything",
                  "uuid": disk.uuid or ("1234-5678" if disk.uuid_not else None)}
        out.append((machine, device, True))
        label = device["label"][:-1] + ("x" if device["label"][-1] != "x" else "y")
        if not any(_facts._matches(leaf.labels, label, True) for leaf in leaves):
            out.append((machine, {**device, "label": label}, False))
        if device["label"] != "anything":
            out.append((machine, {**device, "fstype": "ext4", "uuid": None}, False))
        if disk.uuid or disk.uuid_not:
            out.append((machine, {**device, "uuid": disk.uuid_not or "1234-5678"}, None))
        out += [(miss, device, False if fact.children() and isinstance(fact, _facts.AllOf) else None)
                for miss in misses]
    return out


def _disk_paths(fact, name: str) -> list[tuple[Machine, _facts.Disk, list[Machine]]]:
    """Each Disk leaf of ``fact``, a machine where the rest of its branch holds, and machines
    where that rest does not."""
    if isinstance(fact, _facts.Disk):
        return [(Machine(), fact, [])]
    if isinstance(fact, _facts.AnyOf):
        return [path for f in fact.facts if has_disk(f) for path in _disk_paths(f, name)]
    if isinstance(fact, _facts.AllOf):
        out = []
        others = [f for f in fact.facts if not has_disk(f)]
        for machine, disk, misses in _disk_paths(next(f for f in fact.facts if has_disk(f)), name):
            rest = [positives(f, name)[:1] for f in others]
            for joined in _all_of([[machine], *rest]):
                failing = [m for i, f in enumerate(others)
                           for m in _all_of([[machine], negatives(f, name)[:1],
                                             *[positives(g, name)[:1] for j, g in enumerate(others) if j != i]])]
                out.append((joined, disk, misses + failing))
        return out
    return []


def make_device(top: str, device: dict) -> str:
    """An image with that filesystem type, label and UUID."""
    os.makedirs(f"{top}/src", exist_ok=True)
    with open(f"{top}/src/meta-data", "w") as f:
        f.write("instance-id: i-declared\n")
    image = f"{top}/disk.img"
    fstype, label = device["fstype"], device["label"]
    if fstype == "iso9660":
        return make_iso(f"{top}/src", image, label)
    if fstype == "vfat":
        return make_vfat(f"{top}/src", image, label, device["uuid"])
    subprocess.run(["truncate", "-s", "4M", image], check=True)
    argv = {"udf": ["mkudffs", f"--label={label}", image], "ext4": ["mkfs.ext4", "-q", "-L", label, image]}[fstype]
    subprocess.run(argv, check=True, capture_output=True)
    return image


def disk_cases() -> list:
    return [pytest.param(cls.name, fact, machine, device, expect,
                         id=f"{cls.name}[{number}] {device['fstype']} {device['label']!r} {device['uuid'] or ''} "
                            f"{'holds' if expect else 'near miss' if expect is False else 'other'}")
            for cls in CLASSES for number, fact in enumerate(cls.detection, 1) if has_disk(fact)
            for machine, device, expect in disk_machines(fact, cls.name)]


@pytest.mark.parametrize("name,fact,machine,device,expect", disk_cases())
def test_shell_and_python_decide_alike_on_declared_devices(tmp_path, monkeypatch, name, fact, machine, device,
                                                           expect):
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("needs root and loop devices")
    image = make_device(str(tmp_path / "image"), device)
    root = build(str(tmp_path), machine)
    with loop_device(image):
        agree(name, fact, machine, root, str(tmp_path), expect, monkeypatch)
