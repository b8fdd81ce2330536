"""cloud-init's documented examples (22.4 and the newer release), fetched from Debian at test time.

Nothing of cloud-init is committed here: the documents are read from Debian's packages into the
cache (``$CLOUDSEED_CACHE`` or ``~/.cache/cloudseed``), as ``tests/reference.py`` does.
- 22.4 (bookworm): the binary package's ``/usr/share/doc/cloud-init/examples`` (through
  ``reference.reference_tree``) and every module's ``meta["examples"]`` (read with Debian's python3);
- the newer releases: the newer oracle's binary package (``reference.NEW_VERSION``) for its
  ``doc/examples``, and a source package from ``reference.NEW_SUITES`` (that version, else the
  newest source the archive serves: it may carry a suite's binaries before its sources) for its
  ``doc/examples`` and the module documentation's ``doc/module-docs/cc_*/example*.yaml`` (binary
  packages leave those out). apt is pointed at
  those suites through a private configuration in the cache (signatures checked against Debian's
  keyring); the machine's sources are not touched.

``user_data_examples()`` -> ``{"22.4/doc/cloud-config-ntp.txt": bytes, ...}``: only documents that
are user-data (network-config examples, READMEs and meta-data are left out).
"""

from __future__ import annotations

import fcntl
import glob
import gzip
import json
import os
import subprocess
import tarfile

from tests.reference import CACHE, NEW_SUITES, NEW_VERSION, oracle_named, reference_python, reference_tree

NEWER_DIR = os.path.join(CACHE, "cloud-init-examples-new")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
NOT_USER_DATA = ("network-config", "README", "meta-data", "kernel-cmdline")


def _doc_examples(directory: str, release: str) -> dict[str, bytes]:
    found = {}
    for path in sorted(glob.glob(os.path.join(directory, "**", "*"), recursive=True)):
        name = os.path.relpath(path, directory)
        if not os.path.isfile(path) or any(word in name for word in NOT_USER_DATA):
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        if name.endswith(".gz"):
            data, name = gzip.decompress(data), name[:-3]
        found[f"{release}/doc/{name}"] = data
    return found


MODULE_EXAMPLES = """
import importlib, json, pkgutil
import cloudinit.config as config
out = {}
for info in pkgutil.iter_modules(config.__path__):
    if not info.name.startswith("cc_"):
        continue
    module = importlib.import_module("cloudinit.config." + info.name)
    for i, text in enumerate((getattr(module, "meta", None) or {}).get("examples") or []):
        out[f"{info.name}/example{i + 1}"] = text
print(json.dumps(out))
"""


def examples_22_4() -> dict[str, bytes]:
    tree = reference_tree()
    if tree is None:
        return {}
    found = _doc_examples(os.path.join(tree, "usr/share/doc/cloud-init/examples"), "22.4")
    modules = json.loads(reference_python(MODULE_EXAMPLES).stdout.strip().splitlines()[-1])
    for name, text in modules.items():
        body = text if text.lstrip().startswith("#cloud-config") else "#cloud-config\n" + text
        found[f"22.4/module-docs/{name}"] = body.encode("utf-8")
    return found


def _apt(*args: str, cwd: str) -> subprocess.CompletedProcess:
    state = os.path.join(NEWER_DIR, "apt")
    options = ["-o", f"Dir::Etc::sourcelist={state}/sources.list", "-o", "Dir::Etc::sourceparts=-",
               "-o", f"Dir::State::Lists={state}/lists", "-o", f"Dir::Cache={state}/cache",
               "-o", "Debug::NoLocking=1"]
    return subprocess.run(["apt-get", "-q", *options, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def newer_tree() -> str | None:
    """The unpacked examples of the newer release (``doc/examples``, ``doc/module-docs``); None if unavailable."""
    done = os.path.join(NEWER_DIR, "unpacked")
    if os.path.isdir(done):
        return done
    for sub in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(NEWER_DIR, "apt", sub), exist_ok=True)
    with open(os.path.join(NEWER_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isdir(done):
            return done
        with open(os.path.join(NEWER_DIR, "apt", "sources.list"), "w") as handle:
            handle.writelines(f"deb-src [signed-by={KEYRING}] http://deb.debian.org/debian {suite} main\n"
                              for suite in NEW_SUITES)
        work = os.path.join(NEWER_DIR, "download")
        os.makedirs(work, exist_ok=True)
        os.chmod(work, 0o777)   # apt's sandbox user writes here
        if _apt("update", cwd=work).returncode != 0:
            return None
        # the pinned release, else the newest source each suite serves (the archive may carry a
        # suite's binaries before its sources)
        for wanted in (f"cloud-init={NEW_VERSION}", *(f"cloud-init/{suite}" for suite in NEW_SUITES)):
            if _apt("source", "--download-only", wanted, cwd=work).returncode == 0:
                break
        tarballs = glob.glob(os.path.join(work, "cloud-init_*.orig.tar.*"))
        if not tarballs:
            return None
        partial = done + ".partial"
        os.makedirs(partial, exist_ok=True)
        with tarfile.open(tarballs[0]) as archive:
            for member in archive.getmembers():
                parts = member.name.split("/")
                if member.isfile() and len(parts) > 2 and parts[1] == "doc" and parts[2] in ("examples", "module-docs"):
                    target = os.path.join(partial, *parts[2:])
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with archive.extractfile(member) as source, open(target, "wb") as out:
                        out.write(source.read())
        version = os.path.basename(tarballs[0]).split("_")[1].split(".orig")[0]
        with open(os.path.join(partial, "VERSION"), "w") as handle:
            handle.write(version + "\n")
        os.rename(partial, done)
    return done


def examples_newer() -> dict[str, bytes]:
    found = {}
    binary = oracle_named("new").tree()   # the newer oracle's own package: its doc/examples
    if binary is not None:
        found.update(_doc_examples(os.path.join(binary, "usr/share/doc/cloud-init/examples"),
                                   oracle_named("new").version()))
    tree = newer_tree()
    if tree is None:
        return found
    with open(os.path.join(tree, "VERSION")) as handle:
        release = handle.read().strip()
    found.update({k: v for k, v in _doc_examples(os.path.join(tree, "examples"), release).items()})
    for path in sorted(glob.glob(os.path.join(tree, "module-docs", "cc_*", "example*.yaml"))):
        with open(path, "rb") as handle:
            data = handle.read()
        name = f"{release}/module-docs/{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)}"
        found[name] = data if data.lstrip().startswith(b"#cloud-config") else b"#cloud-config\n" + data
    return found


def user_data_examples() -> dict[str, bytes]:
    return {**examples_22_4(), **examples_newer()}
