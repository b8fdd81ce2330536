"""``cloudseed install [--with-package]``: install the systemd units and generator into a root.

Units go to ``/usr/lib/systemd/system``, the generator to ``/usr/lib/systemd/system-generators``,
the later stages' helper to ``/usr/lib/cloudseed/cloudseed-stage``, udev rules (Azure's disk
links) to ``/usr/lib/udev/rules.d``;
the generator enables ``cloudseed.target`` at each boot unless the agent is disabled or no
datasource can exist. ``--with-package`` also copies this cloudseed package into the root's
``/usr/lib/python3/dist-packages`` with a ``/usr/bin/cloudseed`` launcher (for images), byte-compiled,
with the merged module schema cached beside it (see ``cloudseed.agent.config.schema``).
"""

from __future__ import annotations

import argparse
import os

HELP = "install the systemd units (and optionally the package) into a root"

UNIT_DIR = "/usr/lib/systemd/system"
GENERATOR_DIR = "/usr/lib/systemd/system-generators"
PACKAGE_DIR = "/usr/lib/python3/dist-packages/cloudseed"
LAUNCHER = "/usr/bin/cloudseed"
STAGE_HELPER = "/usr/lib/cloudseed/cloudseed-stage"  # ExecStart of the later stages' units
UDEV_RULES_DIR = "/usr/lib/udev/rules.d"
UDEV_RULES = ("66-cloudseed-azure-ephemeral.rules",)  # /dev/disk/cloud/azure_resource for the Azure datasource
UNITS = ("cloudseed-local.service", "cloudseed-network.service", "cloudseed-config.service",
         "cloudseed-final.service", "cloudseed.target", "cloudseed-before-sshd.target", "cloudseed-hold-sshd.service")


def configure(parser: argparse.ArgumentParser) -> None:
    # as documented: `cloudseed install --root DIR --with-package` (the global --root works before the verb too)
    parser.add_argument("--root", default=argparse.SUPPRESS, metavar="DIR", help="the root to install into")
    parser.add_argument("--with-package", action="store_true",
                        help="also copy the cloudseed package and a /usr/bin/cloudseed launcher")
    parser.add_argument("--no-compile", action="store_true", help="do not byte-compile the copied package")
    parser.add_argument("--cloud-init-compat", action="store_true",
                        help="also install cloud-init's commands (cloud-init, cloud-id, cloud-init-per) in /usr/bin")


def install_units(root) -> list[str]:
    data = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "systemd")
    written = []
    for unit in UNITS:
        with open(os.path.join(data, unit), "rb") as f:
            written.append(root.write(f"{UNIT_DIR}/{unit}", f.read(), mode=0o644))
    with open(os.path.join(data, "cloudseed-generator"), "rb") as f:
        written.append(root.write(f"{GENERATOR_DIR}/cloudseed-generator", f.read(), mode=0o755))
    with open(os.path.join(data, "cloudseed-stage"), "rb") as f:
        written.append(root.write(STAGE_HELPER, f.read(), mode=0o755))
    for rule in UDEV_RULES:
        with open(os.path.join(os.path.dirname(data), "udev", rule), "rb") as f:
            written.append(root.write(f"{UDEV_RULES_DIR}/{rule}", f.read(), mode=0o644))
    return written


def install_package(root, compile_bytecode: bool = True) -> int:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    count = 0
    root.remove_tree(PACKAGE_DIR)
    for directory, dirnames, filenames in os.walk(package):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        rel = os.path.relpath(directory, package)
        target = PACKAGE_DIR if rel == "." else f"{PACKAGE_DIR}/{rel}"
        for name in filenames:
            if name.endswith((".pyc", ".pyo", ".so")):  # .so: the server's C fast path as built here
                continue
            source = os.path.join(directory, name)
            with open(source, "rb") as f:
                mode = 0o755 if os.access(source, os.X_OK) and not name.endswith(".py") else 0o644
                root.write(f"{target}/{name}", f.read(), mode=mode)
            count += 1
    root.write(LAUNCHER, "#!/usr/bin/python3\nimport sys\nfrom cloudseed.cli import main\n\nsys.exit(main())\n",
               mode=0o755)
    if compile_bytecode and root.which("python3"):
        root.run(["python3", "-m", "compileall", "-q", PACKAGE_DIR], check=False)
    from cloudseed.agent.config.schema import write_schema_cache

    write_schema_cache(root.path(PACKAGE_DIR))  # the boot then needs not import every module
    return count


def run(args: argparse.Namespace) -> int:
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    units = install_units(root)
    print(f"cloudseed install: {len(units)} systemd files under {root.top}")
    if args.with_package:
        count = install_package(root, compile_bytecode=not args.no_compile)
        print(f"cloudseed install: package ({count} files) at {PACKAGE_DIR}, launcher {LAUNCHER}")
    if args.cloud_init_compat:
        from cloudseed.commands.cloud_init import install_launchers

        print(f"cloudseed install: cloud-init's commands: {', '.join(install_launchers(root))}")
    if root.is_live and root.which("systemctl"):
        root.run(["systemctl", "daemon-reload"], check=False)
    return 0
