"""Differential: the apt/yum files our repository modules write vs Debian's cloud-init 22.4's.

The reference's own module code (``cc_apt_configure``, ``cc_apt_pipelining``, ``cc_yum_add_repo``)
runs with Debian's python3 in a private mount namespace where a temporary directory is
bind-mounted over ``/etc/apt`` and ``/var/lib/apt/lists`` (so it writes there, never to this
machine's apt); its commands (``apt-get update``, ``debconf-set-selections``) are recorded, not
run; the release is fixed and the mirrors come from the distro's ``package_mirrors`` as Debian's
and Ubuntu's cloud.cfg set them. Ours runs through the real framework in a temporary root.

Files are compared by meaning: sources as sets of (type, URI, suite, component, options) per
file, with ``signed-by`` resolved to the key it names; keyrings by content; apt.conf snippets and
mirror lists line by line without comments; ``.repo`` files as parsed INI. Deliberate differences
are named in the test id (``differs-...``) and applied to the reference's result explicitly:

- ``signed-by``: a source's key is a keyring only that source trusts (``signed-by``), where the
  reference puts it in ``/etc/apt/trusted.gpg.d`` (trusted for every source);
- ``deb822``: on an image with ``sources.list.d/debian.sources`` we rewrite that file, where the
  reference writes ``sources.list`` beside it (every entry twice);
- ``legacy-proxy``: the reference swaps ``apt_https_proxy`` and ``apt_ftp_proxy`` when converting
  the legacy keys; we do not;
- ``metalink``: a yum repository with only ``metalink``/``mirrorlist`` is written; the reference
  (22.4) skips any repository without ``baseurl``;
- ``security-without-primary``: a configured security mirror is used when no primary one is; the
  reference then falls back to the default for both.
The keyring of a ``$KEY_FILE`` source lives in ``/etc/apt/keyrings`` where the reference uses
``/etc/apt/cloud-init.gpg.d``: the same meaning (the source names its keyring), so no entry.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import subprocess

import pytest

from tests.agent.modules.module_support import run
from tests.reference import reference_python, reference_tree

pytestmark = pytest.mark.reference

UBUNTU_OS_RELEASE = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\nVERSION_CODENAME=jammy\n'
DEBIAN_SOURCES = ("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n"
                  "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")

DRIVER = r'''
import ctypes, json, logging, os, sys
module, doc, top, distro, codename, templates = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:7]
libc = ctypes.CDLL(None, use_errno=True)
def check(rc, what):
    if rc != 0:
        raise OSError(ctypes.get_errno(), what)
check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
check(libc.mount(b"none", b"/", None, 0x4000 | (1 << 18), None), "mount --make-rprivate /")
for inner in ("etc/apt", "var/lib/apt/lists"):
    os.makedirs(os.path.join(top, inner), exist_ok=True)
    check(libc.mount(os.path.join(top, inner).encode(), ("/" + inner).encode(), None, 4096, None), inner)
from cloudinit import subp, util
from cloudinit.config import cc_apt_configure, cc_apt_pipelining, cc_yum_add_repo
from cloudinit.distros import debian
commands = []
class Subp:
    ProcessExecutionError = subp.ProcessExecutionError
    target_path = staticmethod(subp.target_path)
    @staticmethod
    def which(name, *args, **kwargs):
        return "/usr/bin/" + name
    @staticmethod
    def subp(argv, data=None, **kwargs):
        commands.append([list(argv), data.decode() if isinstance(data, bytes) else data])
        return ("", "")
cc_apt_configure.subp = Subp
util.lsb_release = lambda target=None: {"codename": codename, "id": distro, "release": "", "description": ""}
util.get_dpkg_architecture = lambda target=None: "amd64"
mirrors = {  # system_info.package_mirrors of Debian's and Ubuntu's cloud.cfg
    "debian": [{"arches": ["default"], "failsafe": {"primary": "https://deb.debian.org/debian",
                                                    "security": "https://deb.debian.org/debian-security"}}],
    "ubuntu": [{"arches": ["i386", "amd64"], "failsafe": {"primary": "http://archive.ubuntu.com/ubuntu",
                                                          "security": "http://security.ubuntu.com/ubuntu"}},
               {"arches": ["default"], "failsafe": {"primary": "http://ports.ubuntu.com/ubuntu-ports",
                                                    "security": "http://ports.ubuntu.com/ubuntu-ports"}}]}
the_distro = debian.Distro(distro, {"package_mirrors": mirrors.get(distro, mirrors["debian"])}, None)
the_distro.update_package_sources = lambda: commands.append([["apt-get", "update"], None])
class Datasource:
    def get_package_mirror_info(self):
        return the_distro.get_package_mirror_info(arch="amd64")
class Cloud:
    datasource = Datasource()
    distro = the_distro
    def get_template_filename(self, name):
        path = os.path.join(templates, name + ".tmpl")
        return path if os.path.exists(path) else None
logging.basicConfig(level=logging.CRITICAL)
handler = {"apt_configure": cc_apt_configure, "apt_pipelining": cc_apt_pipelining, "yum_add_repo": cc_yum_add_repo}
handler[module].handle(module, doc, Cloud(), logging.getLogger("reference"), [])
print(json.dumps(commands))
'''


# ------------------------------------------------------------------------------ the documents
def src(name: str, **entry) -> dict:
    return {name: entry}


MIRROR = {"arches": ["default"], "uri": "http://mirror.example.com/debian"}
DOCS = [
    # (id, module, distro, document, deliberate differences, files already in the image)
    ("primary-uri", "apt_configure", "debian", {"apt": {"primary": [MIRROR]}}, (), {}),
    ("primary-and-security", "apt_configure", "debian",
     {"apt": {"primary": [MIRROR], "security": [{"arches": ["default"], "uri": "http://sec.example.com/sec"}]}},
     (), {}),
    ("arch-specific-mirror", "apt_configure", "debian",
     {"apt": {"primary": [{"arches": ["arm64"], "uri": "http://arm.example.com/debian"},
                          {"arches": ["amd64"], "uri": "http://amd.example.com/debian"},
                          {"arches": ["default"], "uri": "http://other.example.com/debian"}]}}, (), {}),
    ("disable-aliases", "apt_configure", "debian",
     {"apt": {"primary": [MIRROR], "disable_suites": ["backports", "updates"]}}, (), {}),
    ("disable-release-and-custom", "apt_configure", "debian",
     {"apt": {"disable_suites": ["release", "$RELEASE-security"]}}, (), {}),
    ("default-debian-mirrors", "apt_configure", "debian", {"apt": {"conf": "APT::Color \"0\";\n"}}, (), {}),
    ("custom-template", "apt_configure", "debian",
     {"apt": {"primary": [MIRROR], "sources_list":
              "deb $MIRROR $RELEASE main contrib\ndeb $PRIMARY $RELEASE-updates main\n"
              "deb [arch=amd64] $SECURITY $RELEASE-security main\n# a comment\n"}}, (), {}),
    ("custom-template-disabled-suites", "apt_configure", "debian",
     {"apt": {"sources_list": "deb http://a.example/debian $RELEASE main\n"
                              "deb [ arch=amd64,arm64 ] http://a.example/debian $RELEASE-backports main\n",
              "disable_suites": ["backports"]}}, (), {}),
    ("jinja-template", "apt_configure", "debian",
     {"apt": {"primary": [MIRROR], "sources_list": "## template:jinja\ndeb {{mirror}} {{codename}} main\n"
                                                   "deb {{security}} {{codename}}-security main\n"}}, (), {}),
    ("preserve-with-proxies", "apt_configure", "debian",
     {"apt": {"preserve_sources_list": True, "proxy": "http://p.example:3128",
              "https_proxy": "http://sp.example:3129", "ftp_proxy": "ftp://fp.example:21"}}, (), {}),
    ("http-proxy-and-conf", "apt_configure", "debian",
     {"apt": {"preserve_sources_list": True, "http_proxy": "http://user:pw@p.example:3128",
              "conf": "APT {\n  Get {\n    Assume-Yes \"true\";\n  };\n};\n"}}, (), {}),
    ("source-with-key-file", "apt_configure", "debian",
     {"apt": {"preserve_sources_list": True, "sources": src(
         "example", source="deb [signed-by=$KEY_FILE] http://repo.example.com/apt $RELEASE main", key="@KEY@")}},
     (), {}),
    ("source-key-signed-by", "apt_configure", "debian",
     {"apt": {"preserve_sources_list": True, "sources": src(
         "example", source="deb http://repo.example.com/apt stable main", key="@KEY@")}}, ("signed-by",), {}),
    ("source-filename-overwrite", "apt_configure", "debian",
     {"apt": {"preserve_sources_list": True, "sources": {
         "one": {"source": "deb http://one.example/apt stable main", "filename": "shared.list"},
         "two": {"source": "deb http://two.example/apt $RELEASE main", "filename": "shared.list",
                 "append": False}}}}, (), {}),
    ("sources-appended", "apt_configure", "debian",
     {"apt": {"preserve_sources_list": True, "sources": {
         "one": {"source": "deb http://one.example/apt stable main", "filename": "shared"},
         "two": {"source": "deb-src $MIRROR $RELEASE main", "filename": "shared"}}}}, (), {}),
    ("key-only-entry", "apt_configure", "debian",
     {"apt": {"preserve_sources_list": True, "sources": src("onlykey", key="@KEY@")}}, (), {}),
    ("mirror-key", "apt_configure", "debian",
     {"apt": {"primary": [dict(MIRROR, key="@KEY@")]}}, (), {}),
    ("legacy-mirror-and-proxy", "apt_configure", "debian",
     {"apt_mirror": "http://legacy.example.com/debian", "apt_proxy": "http://p.example:3128"}, (), {}),
    ("legacy-sources-list", "apt_configure", "debian",
     {"apt_preserve_sources_list": True, "apt_sources": [
         {"source": "deb http://a.example/apt stable main"},
         {"source": "deb http://b.example/apt stable main", "filename": "b.list"}]}, (), {}),
    ("legacy-custom-template", "apt_configure", "debian",
     {"apt_custom_sources_list": "deb $MIRROR $RELEASE main\n", "apt_mirror": "http://l.example/debian"}, (), {}),
    ("legacy-https-ftp-proxy", "apt_configure", "debian",
     {"apt_preserve_sources_list": True, "apt_https_proxy": "http://s.example:3129",
      "apt_ftp_proxy": "ftp://f.example:21"}, ("legacy-proxy",), {}),
    ("ubuntu-default-template", "apt_configure", "ubuntu",
     {"apt": {"primary": [{"arches": ["default"], "uri": "http://ubuntu.example.com/ubuntu"}],
              "disable_suites": ["backports"]}}, (), {}),
    ("ubuntu-default-mirrors", "apt_configure", "ubuntu", {"apt": {"disable_suites": ["security"]}}, (), {}),
    ("generate-mirrorlists", "apt_configure", "debian",
     {"apt": {"generate_mirrorlists": True, "primary": [MIRROR]}}, (), {}),
    ("deb822-image", "apt_configure", "debian",
     {"apt": {"primary": [MIRROR], "disable_suites": ["backports"]}}, ("deb822",),
     {"/etc/apt/sources.list.d/debian.sources": DEBIAN_SOURCES}),
    ("security-without-primary", "apt_configure", "debian",
     {"apt": {"security": [{"arches": ["default"], "uri": "http://sec.example.com/sec"}]}},
     ("security-without-primary",), {}),
    ("pipelining-false", "apt_pipelining", "debian", {"apt_pipelining": False}, (), {}),
    ("pipelining-depth", "apt_pipelining", "debian", {"apt_pipelining": 3}, (), {}),
    ("pipelining-os", "apt_pipelining", "debian", {"apt_pipelining": "os"}, (), {}),
    ("yum-basic", "yum_add_repo", "rhel",
     {"yum_repos": {"epel-testing": {"name": "EPEL testing", "baseurl": "https://m.example/epel/9/$basearch",
                                     "enabled": False, "gpgcheck": True,
                                     "gpgkey": "file:///etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9"}}}, (), {}),
    ("yum-options-passed-through", "yum_add_repo", "rhel",
     {"yum_repos": {"my repo": {"baseurl": "http://a.example/r", "Repo-GPGCheck": True, "priority": 10,
                                "skip_if_unavailable": False, "metadata_expire": "6h"},
                    "second": {"baseurl": "http://b.example/r", "exclude": "kernel*"}}}, (), {}),
    ("yum-metalink-only", "yum_add_repo", "rhel",
     {"yum_repos": {"with-base": {"baseurl": "http://a.example/r"},
                    "metalink-only": {"metalink": "https://m.example/metalink?repo=x"}}}, ("metalink",), {}),
]


# ------------------------------------------------------------------------------ reading files by meaning
def _digest(data: bytes) -> str:
    return "key:" + hashlib.sha256(data).hexdigest()[:16]


def _read(top: str, inner: str) -> bytes | None:
    try:
        with open(os.path.join(top, inner.lstrip("/")), "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _options(pairs, top: str) -> frozenset:
    out = set()
    for name, value in pairs:
        name = name.lower()
        if name in ("signed-by", "signed_by"):
            data = _read(top, value)
            value = _digest(data) if data is not None else f"missing:{value}"
        elif name in ("arch", "architectures"):
            name, value = "arch", ",".join(sorted(value.replace(",", " ").split()))
        out.add((name, value))
    return frozenset(out)


def _one_line_entries(text: str, top: str) -> set:
    entries = set()
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.replace("[", " [ ").replace("]", " ] ").split()
        pairs = []
        if words[1] == "[":
            end = words.index("]")
            pairs = [tuple(w.split("=", 1)) for w in words[2:end]]
            words = [words[0]] + words[end + 1:]
        for component in words[3:]:
            entries.add((words[0], words[1].rstrip("/"), words[2], component, _options(pairs, top)))
    return entries


def _deb822_entries(text: str, top: str) -> set:
    entries = set()
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line and not line.startswith("#") and ":" in line:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
        if not fields or fields.get("enabled", "yes").lower() == "no":
            continue
        extra = [(k, v) for k, v in fields.items() if k not in ("types", "uris", "suites", "components")]
        for kind in fields["types"].split():
            for uri in fields["uris"].split():
                for suite in fields["suites"].split():
                    for component in fields.get("components", "").split():
                        entries.add((kind, uri.rstrip("/"), suite, component, _options(extra, top)))
    return entries


def meaning(top: str, skip: tuple[str, ...] = ()) -> dict:
    """What the files under ``top`` mean to apt / dnf."""
    out: dict = {"sources": {}, "trusted": {}, "conf": {}, "mirrors": {}, "repos": {}, "other": []}
    for directory, _dirs, files in os.walk(top):
        for name in files:
            host = os.path.join(directory, name)
            inner = "/" + os.path.relpath(host, top)
            if inner in skip or inner.startswith(("/etc/os-release", "/etc/passwd", "/etc/group", "/var/lib/cloud")):
                continue
            data = _read(top, inner) or b""
            text = data.decode("utf-8", errors="replace")
            main = inner in ("/etc/apt/sources.list", "/etc/apt/sources.list.d/debian.sources",
                             "/etc/apt/sources.list.d/ubuntu.sources")
            if inner.startswith("/etc/apt/sources.list"):
                group = "<main>" if main else os.path.splitext(name)[0]
                parse = _deb822_entries if name.endswith(".sources") else _one_line_entries
                out["sources"].setdefault(group, set()).update(parse(text, top))
            elif inner.startswith("/etc/apt/trusted.gpg.d/"):
                out["trusted"][os.path.splitext(name)[0]] = _digest(data)
            elif inner.startswith(("/etc/apt/keyrings/", "/etc/apt/cloud-init.gpg.d/")):
                continue  # meaningful only through a signed-by that names it
            elif inner.startswith("/etc/apt/apt.conf.d/"):
                out["conf"][name] = sorted(line.strip() for line in text.splitlines()
                                           if line.strip() and not line.strip().startswith(("//", "#")))
            elif inner.startswith("/etc/apt/mirrors/"):
                out["mirrors"][name] = text.split()
            elif name.endswith(".repo"):
                parser = configparser.ConfigParser(interpolation=None)
                parser.read_string(text)
                out["repos"][name] = {s: dict(parser[s]) for s in parser.sections()}
            else:
                out["other"].append(inner)
    out["sources"] = {k: v for k, v in out["sources"].items() if v}
    return out


# ------------------------------------------------------------------------------ the deliberate differences
def apply_differences(theirs: dict, differences: tuple[str, ...]) -> dict:
    if "signed-by" in differences:
        for stem, digest in list(theirs["trusted"].items()):
            if stem in theirs["sources"]:
                del theirs["trusted"][stem]
                theirs["sources"][stem] = {_with_signed_by(entry, digest) for entry in theirs["sources"][stem]}
    if "legacy-proxy" in differences:
        swap = {"Acquire::https::Proxy": "Acquire::ftp::Proxy", "Acquire::ftp::Proxy": "Acquire::https::Proxy"}
        lines = theirs["conf"].get("90cloud-init-aptproxy", [])
        theirs["conf"]["90cloud-init-aptproxy"] = sorted(
            swap.get(line.split()[0], line.split()[0]) + " " + line.split(" ", 1)[1] for line in lines)
    return theirs


def _with_signed_by(entry: tuple, digest: str) -> tuple:
    kind, uri, suite, component, options = entry
    return kind, uri, suite, component, frozenset(set(options) | {("signed-by", digest)})


# ------------------------------------------------------------------------------ running both
@pytest.fixture(scope="module")
def armoured_key(tmp_path_factory):
    import shutil

    if not shutil.which("gpg"):
        pytest.skip("needs gpg (scripts/setup.sh installs it)")
    home = str(tmp_path_factory.mktemp("gnupg"))
    os.chmod(home, 0o700)
    gpg = ["gpg", "--homedir", home, "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]
    subprocess.run(gpg + ["--quick-generate-key", "Differential <d@example.invalid>", "ed25519", "sign", "never"],
                   check=True, capture_output=True)
    armour = subprocess.run(gpg + ["--armor", "--export"], check=True, capture_output=True, text=True).stdout
    subprocess.run(["gpgconf", "--homedir", home, "--kill", "all"], capture_output=True)
    return armour


def _with_key(value, key: str):
    if isinstance(value, dict):
        return {k: _with_key(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_key(v, key) for v in value]
    return key if value == "@KEY@" else value


def _their_doc(module: str, doc: dict, top: str) -> dict:
    if module == "yum_add_repo":
        return dict(doc, yum_repo_dir=os.path.join(top, "etc/yum.repos.d"))
    return doc


def _test_id(case) -> str:
    return case[0] + ("-differs-" + "-".join(case[4]) if case[4] else "")


@pytest.mark.parametrize("case", DOCS, ids=[_test_id(c) for c in DOCS])
def test_files_agree_with_reference(request, tmp_path, armoured_key, case):
    if os.geteuid() != 0:
        pytest.skip("the reference runs in a private mount namespace (needs root)")
    tree = reference_tree() or pytest.skip("reference unavailable")
    name, module, distro, doc, differences, image_files = case
    doc = _with_key(doc, armoured_key)
    root = request.getfixturevalue("rhel_target" if distro == "rhel" else "target")
    if distro == "ubuntu":
        root.write("/etc/os-release", UBUNTU_OS_RELEASE)
    codename = {"ubuntu": "jammy"}.get(distro, "bookworm")
    theirs_top = str(tmp_path / "theirs")
    for inner, content in image_files.items():
        root.write(inner, content)
        os.makedirs(os.path.dirname(os.path.join(theirs_top, inner.lstrip("/"))), exist_ok=True)
        with open(os.path.join(theirs_top, inner.lstrip("/")), "w") as handle:
            handle.write(content)
    proc = reference_python(DRIVER, module, json.dumps(_their_doc(module, doc, theirs_top)), theirs_top,
                            "ubuntu" if distro == "ubuntu" else "debian", codename,
                            os.path.join(tree, "etc/cloud/templates"))
    their_commands = json.loads(proc.stdout.strip().splitlines()[-1])
    result, _ = run(root, module, json.loads(json.dumps(doc)))
    assert result.status == "ok", result.reason
    # deb822: the reference leaves the image's debian.sources beside its sources.list; we replace it
    skip = tuple(image_files) if "deb822" in differences else ()
    theirs = apply_differences(meaning(theirs_top, skip), differences)
    ours = meaning(root.top)
    if "metalink" in differences:
        assert "metalink-only.repo" in ours["repos"] and "metalink-only.repo" not in theirs["repos"]
        del ours["repos"]["metalink-only.repo"]
    if "security-without-primary" in differences:
        # the reference drops the configured security mirror when no primary is configured
        default = "https://deb.debian.org/debian-security"
        assert any(e[1] == "http://sec.example.com/sec" for e in ours["sources"]["<main>"])
        assert not any(e[1] == "http://sec.example.com/sec" for e in theirs["sources"]["<main>"])
        ours["sources"]["<main>"] = {(e[0], default if e[1] == "http://sec.example.com/sec" else e[1], *e[2:])
                                     for e in ours["sources"]["<main>"]}
    if "deb822" in differences:
        # ours keeps the archive keyring the image's stanzas named (not in this temporary root)
        image_keyring = ("signed-by", "missing:/usr/share/keyrings/debian-archive-keyring.gpg")
        assert all(image_keyring in e[4] for e in ours["sources"]["<main>"])
        ours["sources"]["<main>"] = {(*e[:4], e[4] - {image_keyring}) for e in ours["sources"]["<main>"]}
        assert root.read_text("/etc/apt/sources.list.d/debian.sources") != image_files[
            "/etc/apt/sources.list.d/debian.sources"]
        assert not root.exists("/etc/apt/sources.list") or "deb " not in root.read_text("/etc/apt/sources.list")
    assert "missing:" not in repr(ours) + repr(theirs), "a signed-by names a keyring that is not there"
    assert ours == theirs
    if name != "pipelining-os":  # 'os' keeps apt's default: neither writes anything
        assert ours != meaning(str(tmp_path / "nothing")), "the document must write something"
    if "sources" in doc.get("apt", {}) or "apt_sources" in doc:
        assert [["apt-get", "update"], None] in their_commands  # both update; ours has no apt-get here


def test_debconf_selections_match(shell_target, tmp_path):
    """The text both hand to debconf-set-selections (a recording stand-in in our root)."""
    tree = reference_tree() or pytest.skip("reference unavailable")
    selections = {"b-set": "tzdata tzdata/Areas select Europe\ntzdata tzdata/Zones/Europe select Berlin",
                  "a-set": "debconf debconf/frontend select Noninteractive\n"}
    doc = {"apt": {"preserve_sources_list": True, "debconf_selections": selections}}
    proc = reference_python(DRIVER, "apt_configure", json.dumps(doc), str(tmp_path / "theirs"), "debian",
                            "bookworm", os.path.join(tree, "etc/cloud/templates"))
    commands = json.loads(proc.stdout.strip().splitlines()[-1])
    theirs = next(data for argv, data in commands if argv == ["debconf-set-selections"])
    shell_target.write("/usr/bin/debconf-set-selections", "#!/bin/sh\ncat > /tmp/selections\n", mode=0o755)
    result, _ = run(shell_target, "apt_configure", doc)
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/tmp/selections") == theirs
