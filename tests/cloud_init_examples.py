"""cloud-init's documented examples (22.4 and the newer release), fetched from Debian at test time.

Nothing of cloud-init is committed here: the documents are read from Debian's packages into the
cache (``$CLOUDSEED_CACHE`` or ``~/.cache/cloudseed``), as ``tests/reference.py`` does.
- 22.4 (bookworm): the binary package's ``/usr/share/doc/cloud-init/examples`` (through
  ``reference.reference_tree``) and every module's ``meta["examples"]`` (read with Debian's python3);
- the newer release (trixie, 25.x): its binary package's examples, and the module documentation's
  ``doc/module-docs/cc_*/example*.yaml`` from its source package (the binary package leaves them
  out). apt is pointed at trixie through a private configuration in the cache; the machine's
  sources are not touched.

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

from reference import CACHE, reference_python, reference_tree

NEWER_SUITE = "trixie"
NEWER_DIR = os.path.join(CACHE, f"cloud-init-{NEWER_SUITE}")
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
    options = [f"-o Dir::Etc::sourcelist={state}/sources.list", "-o Dir::Etc::sourceparts=/dev/null",
               f"-o Dir::State::Lists={state}/lists", f"-o Dir::Cache::pkgcache={state}/pkgcache.bin",
               f"-o Dir::Cache::srcpkgcache={state}/srcpkgcache.bin"]
    return subprocess.run(["apt-get", "-q", *" ".join(options).split(), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def newer_tree() -> str | None:
    """The unpacked examples of the newer release (``doc/examples``, ``doc/module-docs``); None if unavailable."""
    done = os.path.join(NEWER_DIR, "unpacked")
    if os.path.isdir(done):
        return done
    os.makedirs(os.path.join(NEWER_DIR, "apt", "lists", "partial"), exist_ok=True)
    with open(os.path.join(NEWER_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isdir(done):
            return done
        with open(os.path.join(NEWER_DIR, "apt", "sources.list"), "w") as handle:
            handle.write(f"deb-src http://deb.debian.org/debian {NEWER_SUITE} main\n")
        work = os.path.join(NEWER_DIR, "download")
        os.makedirs(work, exist_ok=True)
        os.chmod(work, 0o777)   # apt's sandbox user writes here
        if _apt("update", cwd=work).returncode != 0 or \
                _apt("source", "--download-only", "cloud-init", cwd=work).returncode != 0:
            return None
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
    tree = newer_tree()
    if tree is None:
        return {}
    with open(os.path.join(tree, "VERSION")) as handle:
        release = handle.read().strip()
    found = _doc_examples(os.path.join(tree, "examples"), release)
    for path in sorted(glob.glob(os.path.join(tree, "module-docs", "cc_*", "example*.yaml"))):
        with open(path, "rb") as handle:
            data = handle.read()
        name = f"{release}/module-docs/{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)}"
        found[name] = data if data.lstrip().startswith(b"#cloud-config") else b"#cloud-config\n" + data
    return found


def user_data_examples() -> dict[str, bytes]:
    return {**examples_22_4(), **examples_newer()}
