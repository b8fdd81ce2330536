"""Put an agent into a lab root tree: cloudseed from the working tree, or Debian's cloud-init.

cloudseed goes in with ``cloudseed install --root TREE --with-package`` when that verb exists;
until it does, the package is copied and four stage units are written here. Every lab image also
gets a small *collector*: after the agent is done it prints the agent's status and result JSON
on the serial console (one line each), so the lab can report without logging in.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

from cloudseed.lab.images.rootfs import ImageBuildError, chroot_mounts, log, run

LAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # cloudseed/lab
PACKAGE_DIR = os.path.dirname(LAB_DIR)  # cloudseed
# what the image's copy of the package leaves out (and so image.package_hash too): bytecode, and
# the server's C fast path as built on this host (*.so)
NOT_COPIED = ("__pycache__", "*.pyc", "*.so")
COLLECT_MARK = "cloudseed-lab:"

_LAUNCHER = "#!/usr/bin/python3\nimport sys\nfrom cloudseed.cli import main\nsys.exit(main())\n"

# The four boot stages as systemd units (used only until `cloudseed install` exists).
_FALLBACK_UNITS = {
    "cloudseed-local.service": ("cloudseed init --local", "DefaultDependencies=no\nWants=network-pre.target\n"
                                "After=systemd-remount-fs.service\nBefore=network-pre.target\n"
                                "Before=sysinit.target shutdown.target\nConflicts=shutdown.target\n"),
    "cloudseed-network.service": ("cloudseed init", "Wants=network-online.target\n"
                                  "After=cloudseed-local.service network-online.target\n"
                                  "Before=sshd.service ssh.service systemd-user-sessions.service\n"),
    "cloudseed-config.service": ("cloudseed modules --mode config",
                                 "After=cloudseed-network.service network-online.target\n"),
    "cloudseed-final.service": ("cloudseed modules --mode final",
                                "After=cloudseed-config.service multi-user.target\n"),
}

_COLLECT_SCRIPT = """#!/bin/sh
# Lab collector: report the agent's status and result on the serial console, one line each.
out=/dev/ttyS0
emit() {{ printf '%s %s %s\\n' "{mark}" "$1" "$(tr -d '\\n' < "$2" 2>/dev/null)" > $out; }}
if [ -x /usr/bin/cloudseed ]; then
    /usr/bin/cloudseed status --wait >/dev/null 2>&1
    /usr/bin/cloudseed status --format json --long > /run/cloudseed-lab-status.json 2>/dev/null
    emit status /run/cloudseed-lab-status.json
    emit result /run/cloudseed/result.json
elif [ -x /usr/bin/cloud-init ]; then
    /usr/bin/cloud-init status --wait >/dev/null 2>&1
    emit status /run/cloud-init/status.json
    emit result /run/cloud-init/result.json
fi
printf '%s done\\n' "{mark}" > $out
"""

_COLLECT_UNIT = """[Unit]
Description=cloudseed lab: report the agent's results on the serial console
After=multi-user.target cloudseed-final.service cloud-final.service
# a try restored from a snapshot asks the gate's process instead (labguest.py)
ConditionKernelCommandLine=!cloudseed.lab.gate

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/cloudseed-lab-collect
TimeoutStartSec=900

[Install]
WantedBy=multi-user.target
"""


def install_verb_available() -> bool:
    return importlib.util.find_spec("cloudseed.commands.install") is not None


def install_cloudseed(tree: str) -> str:
    """Install cloudseed from the working tree into ``tree``; returns how it was installed."""
    if install_verb_available():
        run([sys.executable, "-m", "cloudseed", "--root", tree, "install", "--with-package", "--cloud-init-compat"])
        method = "cloudseed install --with-package --cloud-init-compat"
    else:
        _copy_package(tree)
        _write_fallback_units(tree)
        method = "lab fallback (package copy + 4 units)"
    with chroot_mounts(tree):
        run(["chroot", tree, "python3", "-m", "compileall", "-q",
             "/usr/lib/python3/dist-packages/cloudseed"])
    return method


def _copy_package(tree: str) -> None:
    target = os.path.join(tree, "usr/lib/python3/dist-packages/cloudseed")
    if os.path.lexists(target):
        shutil.rmtree(target)
    shutil.copytree(PACKAGE_DIR, target, ignore=shutil.ignore_patterns(*NOT_COPIED))
    launcher = os.path.join(tree, "usr/bin/cloudseed")
    with open(launcher + ".tmp", "w") as handle:
        handle.write(_LAUNCHER)
    os.chmod(launcher + ".tmp", 0o755)
    os.replace(launcher + ".tmp", launcher)


def _write_fallback_units(tree: str) -> None:
    unit_dir = os.path.join(tree, "etc/systemd/system")
    wants = os.path.join(unit_dir, "cloudseed.target.wants")
    os.makedirs(wants, exist_ok=True)
    for name, (command, deps) in _FALLBACK_UNITS.items():
        text = (f"[Unit]\nDescription=cloudseed {name.split('-')[1].split('.')[0]} stage\n{deps}\n"
                f"[Service]\nType=oneshot\nExecStart=/usr/bin/{command}\nRemainAfterExit=yes\n"
                "StandardOutput=journal+console\nTimeoutSec=0\n")
        _write(os.path.join(unit_dir, name), text)
        _symlink(f"/etc/systemd/system/{name}", os.path.join(wants, name))
    _write(os.path.join(unit_dir, "cloudseed.target"),
           "[Unit]\nDescription=cloudseed boot stages\nAfter=multi-user.target\n\n"
           "[Install]\nWantedBy=multi-user.target\n")
    multi = os.path.join(unit_dir, "multi-user.target.wants")
    os.makedirs(multi, exist_ok=True)
    _symlink("/etc/systemd/system/cloudseed.target", os.path.join(multi, "cloudseed.target"))


GUEST_DIR = os.path.join(LAB_DIR, "guest")
GUEST_FILES = ("labguest.py", "labnet.py", "labstate.py")
HELPER = "/usr/local/lib/cloudseed-lab/labguest.py"

# networking.service's command on a try from a snapshot with the network up (its ExecStart lines,
# replaced): ask the try's exec loop (labnet.answer_check) to take down what the agent's new
# configuration changed, and wait for its verdict. "kept" (every interface `ifup -a` would raise is
# up from the snapshot and defined as it was) ends there: `ifup -a` would find each configured and
# do nothing. Otherwise Debian 12's own two commands follow, as the unit has them (ifupdown
# 0.8.41: `ifup -a`, whose failure fails the unit, then the hotplug class after a restart, whose
# failure does not). No pipe (no snapshot network, or networking started again later in the try):
# those two commands alone. As systemd reads it: `$$` is the shell's `$`.
NET_DIR = "/run/cloudseed-lab/net"  # labnet.NET_DIR
NETWORKING_START = (
    f"/bin/sh -c 'if [ -p {NET_DIR}/check ]; then echo check > {NET_DIR}/check; "
    f"read verdict < {NET_DIR}/done; [ \"$$verdict\" = kept ] && exit 0; fi; "
    "/sbin/ifup -a --read-environment || exit; "
    "if [ -f /run/network/restart-hotplug ]; then /sbin/ifup -a --read-environment --allow=hotplug; fi; exit 0'")
NETWORKING_DROPIN = f"[Service]\nExecStart=\nExecStart={NETWORKING_START}\n"
# sshd's start on a try: Debian's unit checks the configuration (`sshd -t`) before `sshd -D`, which
# reads it again and exits 255 on the same errors (no restart: RestartPreventExitStatus=255), so the
# unit fails alike without the check; a try leaves the check out (ExecReload keeps its own).
SSH_DROPIN = "[Service]\nExecStartPre=\n"

# The snapshot point of `lab --repeat` (lab images only): with cloudseed.lab.gate on the kernel command
# line, the agent's local unit runs its command through the guest helper, which holds it before it
# reads anything (labguest.py agent-gate). With cloudseed.lab.net too, the gate raises the image's
# network before the snapshot, and networking.service first takes down what a try's configuration
# changed (labnet.py). Without cloudseed.lab.gate this generator writes nothing: a lab boot pays one
# shell start beside the other generators; an image outside the lab has none of it.
_GATE_GENERATOR = f"""#!/bin/sh
read -r cmdline < /proc/cmdline
case " $cmdline " in *" cloudseed.lab.gate "*) ;; *) exit 0 ;; esac
gate() {{
    mkdir -p "$1/$2.d"
    printf '[Service]\\nExecStart=\\nExecStart=/usr/bin/python3 {HELPER} agent-gate %s\\n' "$3" \\
        > "$1/$2.d/cloudseed-lab-gate.conf"
}}
gate "$1" cloudseed-local.service "/usr/bin/cloudseed boot --hand-off"
gate "$1" cloud-init-local.service "/usr/bin/cloud-init init --local"
mkdir -p "$1/ssh.service.d"
cat > "$1/ssh.service.d/cloudseed-lab-try.conf" <<'EOF'
{SSH_DROPIN}EOF
case " $cmdline " in *" cloudseed.lab.net "*) ;; *) exit 0 ;; esac
mkdir -p "$1/networking.service.d"
cat > "$1/networking.service.d/cloudseed-lab-net.conf" <<'EOF'
{NETWORKING_DROPIN}EOF
"""

# Answers the lab's questions (--expect facts, --compare state) once the agent is done; on a
# restored try the gate's process does this instead (already in memory).
_EXEC_UNIT = f"""[Unit]
Description=cloudseed lab: answer the lab's questions about the finished boot
After=multi-user.target cloudseed-lab-collect.service
ConditionKernelCommandLine=cloudseed.lab.exec

[Service]
ExecStart=/usr/bin/python3 {HELPER} serve

[Install]
WantedBy=multi-user.target
"""


def guest_files_hash() -> str:
    """A hash of what ``install_lab_helper`` puts in an image (part of every lab image's key)."""
    from cloudseed.lab.cache import digest

    items: list[str | bytes] = [_GATE_GENERATOR, _EXEC_UNIT, _COLLECT_SCRIPT, _COLLECT_UNIT]
    for name in GUEST_FILES:
        with open(os.path.join(GUEST_DIR, name), "rb") as handle:
            items.append(handle.read())
    return digest(items)


def install_lab_helper(tree: str) -> None:
    """The guest helper (gate, exec loop, state), its generator and its unit, in every lab image."""
    for name in GUEST_FILES:
        with open(os.path.join(GUEST_DIR, name)) as handle:
            _write(os.path.join(tree, os.path.dirname(HELPER).lstrip("/"), name), handle.read(), 0o755)
    _write(os.path.join(tree, "etc/systemd/system-generators/cloudseed-lab-gate"), _GATE_GENERATOR, 0o755)
    unit_dir = os.path.join(tree, "etc/systemd/system")
    _write(os.path.join(unit_dir, "cloudseed-lab-exec.service"), _EXEC_UNIT)
    wants = os.path.join(unit_dir, "multi-user.target.wants")
    os.makedirs(wants, exist_ok=True)
    _symlink("/etc/systemd/system/cloudseed-lab-exec.service", os.path.join(wants, "cloudseed-lab-exec.service"))


def install_collector(tree: str) -> None:
    """The lab collector script and unit, enabled."""
    script = os.path.join(tree, "usr/local/sbin/cloudseed-lab-collect")
    os.makedirs(os.path.dirname(script), exist_ok=True)
    _write(script, _COLLECT_SCRIPT.format(mark=COLLECT_MARK), 0o755)
    unit_dir = os.path.join(tree, "etc/systemd/system")
    _write(os.path.join(unit_dir, "cloudseed-lab-collect.service"), _COLLECT_UNIT)
    multi = os.path.join(unit_dir, "multi-user.target.wants")
    os.makedirs(multi, exist_ok=True)
    _symlink("/etc/systemd/system/cloudseed-lab-collect.service",
             os.path.join(multi, "cloudseed-lab-collect.service"))


_KEYGEN_UNIT = """[Unit]
Description=lab: generate SSH host keys when missing (what an image without an agent needs)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
"""


# The image without an agent: the network configuration a plain image needs to be reachable, the
# same ifupdown stanza cloudseed writes for the lab's one NIC (fallback DHCP), so the image without
# an agent pays what a configured interface costs at boot (ifupdown-pre's `udevadm settle`, DHCP).
_PLAIN_NETWORK = "# lab: the image without an agent\nauto ens3\niface ens3 inet dhcp\n"
PLAIN_IMAGE_VERSION = "2"  # part of the image key of agent "none": bump when what it gets here changes


def install_host_keygen(tree: str) -> None:
    """For the image without an agent: ``ssh-keygen -A`` before sshd and a DHCP interface, as a
    plain image needs."""
    _write(os.path.join(tree, "etc/network/interfaces.d/50-lab"), _PLAIN_NETWORK)
    unit_dir = os.path.join(tree, "etc/systemd/system")
    _write(os.path.join(unit_dir, "lab-ssh-keygen.service"), _KEYGEN_UNIT)
    multi = os.path.join(unit_dir, "multi-user.target.wants")
    os.makedirs(multi, exist_ok=True)
    _symlink("/etc/systemd/system/lab-ssh-keygen.service", os.path.join(multi, "lab-ssh-keygen.service"))


def install_reference(tree: str) -> None:
    """Debian's cloud-init package from the archive, installed with apt in the tree."""
    with chroot_mounts(tree):
        log("installing Debian's cloud-init in the reference image")
        run(["chroot", tree, "apt-get", "update", "-q"])
        run(["chroot", tree, "apt-get", "install", "-y", "-q", "--no-install-recommends", "cloud-init"])
        run(["chroot", tree, "apt-get", "clean"])
    shutil.rmtree(os.path.join(tree, "var/lib/apt/lists"), ignore_errors=True)
    os.makedirs(os.path.join(tree, "var/lib/apt/lists/partial"), exist_ok=True)
    for key in ("etc/ssh/ssh_host_rsa_key", "etc/ssh/ssh_host_ed25519_key", "etc/ssh/ssh_host_ecdsa_key"):
        for suffix in ("", ".pub"):
            path = os.path.join(tree, key + suffix)
            if os.path.exists(path):
                os.unlink(path)


def install_deb_over_cloud_init(tree: str, deb: str) -> None:
    """cloudseed's .deb installed with apt on a tree that has Debian's cloud-init, as a user would.

    apt resolves the package's Conflicts/Replaces: cloud-init is removed, its /etc/cloud settings
    kept, cloudseed's units enabled; nothing runs at install time.
    """
    inside = f"/tmp/{os.path.basename(deb)}"
    shutil.copyfile(deb, os.path.join(tree, inside.lstrip("/")))
    try:
        with chroot_mounts(tree):
            log(f"installing {os.path.basename(deb)} over Debian's cloud-init in the image")
            run(["chroot", tree, "apt-get", "update", "-q"])
            run(["chroot", tree, "apt-get", "install", "-y", "-q", "--no-install-recommends", inside])
            run(["chroot", tree, "apt-get", "clean"])
    finally:
        os.unlink(os.path.join(tree, inside.lstrip("/")))
    shutil.rmtree(os.path.join(tree, "var/lib/apt/lists"), ignore_errors=True)
    os.makedirs(os.path.join(tree, "var/lib/apt/lists/partial"), exist_ok=True)
    if os.path.exists(os.path.join(tree, "usr/bin/cloud-init")) and not os.path.exists(
            os.path.join(tree, "usr/bin/cloudseed")):
        raise ImageBuildError("the .deb did not replace cloud-init in the image")


def keep_cloud_init_config(reference_tree: str, tree: str) -> None:
    """Debian cloud-init's /etc/cloud from ``reference_tree`` into ``tree``, as removing the package
    (not purging it) leaves it: cloud.cfg, cloud.cfg.d, templates. Files are replaced, never written
    through (``tree`` is a hard-linked copy of the cached base)."""
    source = os.path.join(reference_tree, "etc/cloud")
    for dirpath, _, filenames in os.walk(source):
        target_dir = os.path.join(tree, os.path.relpath(dirpath, reference_tree))
        os.makedirs(target_dir, exist_ok=True)
        for name in filenames:
            target = os.path.join(target_dir, name)
            if os.path.lexists(target):
                os.unlink(target)
            shutil.copy2(os.path.join(dirpath, name), target)


def _write(path: str, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` atomically (never writes through a hard link into the cached base)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.chmod(path + ".tmp", mode)
    os.replace(path + ".tmp", path)


def _symlink(target: str, link: str) -> None:
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)


def copy_tree_linked(source: str, dest: str) -> None:
    """A hard-linked copy of ``source`` at ``dest`` (cheap; files must be replaced, not edited)."""
    if os.path.lexists(dest):
        shutil.rmtree(dest)
    proc = subprocess.run(["cp", "-al", source, dest], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageBuildError(f"cp -al {source} {dest}: {proc.stderr.strip()}")
