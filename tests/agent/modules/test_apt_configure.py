"""apt_configure: sources, keys, mirrors, proxies, apt.conf and debconf, in temporary roots and real apt.

Temporary-root tests check the files written (and what is not written when an entry is bad); the
keyserver is a loopback HKP server. The real-apt tests run in a private debootstrapped Debian
root against the signed loopback repository of tests/agent/packages/repo.py: apt accepts a source
added with its key (no NO_PUBKEY), takes a source signed by another key back, and really sends its
requests through a configured proxy (a loopback proxy that counts them).
"""

from __future__ import annotations

import base64
import http.server
import os
import subprocess
import threading
import time
import urllib.request

import pytest

from cloudseed.agent.modules import _apt_keys as apt_keys
from cloudseed.agent.modules import _apt_mirrors as apt_mirrors
from cloudseed.agent.modules import _apt_sources as apt_sources
from tests.agent.modules.module_support import examples, run

UBUNTU_OS_RELEASE = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n'
MIRROR = [{"arches": ["default"], "uri": "http://mirror.example.com/debian"}]


class Gpg:
    """A throw-away key in its own GNUPGHOME."""

    def __init__(self, home: str, uid: str = "apt test <apt@example.invalid>"):
        os.makedirs(home, mode=0o700, exist_ok=True)
        self.cmd = ["gpg", "--homedir", home, "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]
        self.home = home
        subprocess.run(self.cmd + ["--quick-generate-key", uid, "ed25519", "sign", "never"], check=True,
                       capture_output=True)
        listing = subprocess.run(self.cmd + ["--with-colons", "--list-keys"], check=True, capture_output=True,
                                 text=True).stdout
        self.fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
        self.armoured = subprocess.run(self.cmd + ["--armor", "--export"], check=True, capture_output=True,
                                       text=True).stdout
        self.binary = subprocess.run(self.cmd + ["--export"], check=True, capture_output=True).stdout
        self.secret = subprocess.run(self.cmd + ["--armor", "--export-secret-keys"], check=True,
                                     capture_output=True, text=True).stdout
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "all"], capture_output=True)


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    import shutil

    if not shutil.which("gpg"):
        pytest.skip("needs gpg (scripts/setup.sh installs it)")
    return Gpg(str(tmp_path_factory.mktemp("gnupg")))


@pytest.fixture(scope="module")
def other_key(tmp_path_factory, key):
    return Gpg(str(tmp_path_factory.mktemp("gnupg-other")), "other <other@example.invalid>")


def apt_files(root) -> list[str]:
    found = []
    top = root.path("/etc/apt")
    for directory, _dirs, files in os.walk(top):
        found += [os.path.relpath(os.path.join(directory, f), top) for f in files]
    return sorted(found)


def corrupt(armoured: str) -> str:
    """The armour with one base64 character of the body changed (the CRC no longer matches)."""
    lines = armoured.splitlines()
    index = next(i for i, line in enumerate(lines) if len(line) > 40 and ":" not in line)
    line = lines[index]
    lines[index] = line[:10] + ("A" if line[10] != "A" else "B") + line[11:]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ keys (pure)
def test_dearmour_equals_gpg_and_fingerprint_matches(key):
    assert apt_keys.dearmour(key.armoured) == key.binary
    keys = apt_keys.parse_keys(key.binary)
    assert [k.fingerprint for k in keys] == [key.fingerprint]
    assert keys[0].matches(key.fingerprint[-16:]) and keys[0].matches(key.fingerprint[-8:])
    assert not keys[0].matches("0123456789ABCDEF")
    assert apt_keys.load_key(base64.b64encode(key.binary).decode()) == key.binary  # not armoured
    assert apt_keys.load_key(key.binary) == key.binary  # YAML !!binary


@pytest.mark.parametrize("bad,why", [
    (lambda k: corrupt(k.armoured), "checksum does not match"),
    (lambda k: k.secret, "private key"),
    (lambda k: "hello", "neither an armoured key"),
    (lambda k: base64.b64encode(b"\x99\x00\x20hello").decode(), "truncated"),
    (lambda k: k.armoured.replace("PUBLIC KEY", "SIGNATURE"), "not a public key block"),
])
def test_bad_keys_are_refused_with_the_reason(key, bad, why):
    with pytest.raises(apt_keys.KeyError_, match=why):
        apt_keys.load_key(bad(key))


def test_keyserver_urls():
    assert apt_keys.keyserver_url("keyserver.ubuntu.com") == "https://keyserver.ubuntu.com"
    assert apt_keys.keyserver_url("hkp://keys.example:80") == "http://keys.example:80"
    assert apt_keys.keyserver_url("hkp://keys.example") == "http://keys.example:11371"
    assert apt_keys.keyserver_url("hkps://keys.example/") == "https://keys.example"
    with pytest.raises(apt_keys.KeyError_, match="unsupported scheme"):
        apt_keys.keyserver_url("ldap://keys.example")


# ------------------------------------------------------------------------------ source lines (pure)
@pytest.mark.parametrize("line,why", [
    ("dbe http://a/ stable main", "unknown type"),
    ("deb htp//a/ stable main", "is not a URI"),
    ("deb http://a/ stable", "no component"),
    ("deb [arch=amd64 http://a/ stable main", "never closed"),
    ("deb [arch] http://a/ stable main", "not name=value"),
    ("deb http://a/ ./ main", "exact path"),
])
def test_source_line_typos_are_named(line, why):
    with pytest.raises(apt_sources.SourceError, match=why):
        apt_sources.parse_line(line)


def test_deb822_conversion_means_the_same_entries():
    lines = ["deb http://m/u noble main restricted", "deb http://m/u noble universe",
             "deb http://m/u noble-updates main restricted universe", "deb-src http://m/u noble main",
             "deb [arch=amd64,arm64 signed-by=/k.gpg] http://x/ stable main"]
    text = apt_sources.to_deb822([apt_sources.parse_line(line) for line in lines])

    def expand_lines():
        out = set()
        for line in lines:
            e = apt_sources.parse_line(line)
            out |= {(e.kind, e.uri, e.suite, c) for c in e.components}
        return out

    expanded = set()
    for stanza in apt_sources.parse_deb822(text, "test"):
        for kind in stanza["Types"].split():
            for suite in stanza["Suites"].split():
                for component in stanza["Components"].split():
                    expanded.add((kind, stanza["URIs"], suite, component))
    # "noble universe" and "noble-updates universe" differ in their suite sets: kept exact
    assert expanded == expand_lines()
    assert "Architectures: amd64 arm64\nSigned-By: /k.gpg\n" in text


def test_mirror_selection_by_arch_search_and_dns():
    entries = [{"arches": ["arm64"], "uri": "http://arm/"}, {"arches": ["default"], "search":
                                                            ["http://gone.example/", "http://here.example/"]}]
    resolvable = {"here.example", "debian-mirror.corp.example", "debian-security-mirror.localdomain"}

    def check(url):
        import urllib.parse

        return urllib.parse.urlsplit(url).hostname in resolvable

    mirrors, _ = apt_mirrors.find_mirrors({"primary": entries}, "debian", {}, "", lambda: "arm64", check)
    assert mirrors["PRIMARY"] == "http://arm/" and mirrors["SECURITY"] == "http://arm/"
    mirrors, _ = apt_mirrors.find_mirrors({"primary": entries}, "debian", {}, "", lambda: "amd64", check)
    assert mirrors["PRIMARY"] == "http://here.example/"
    dns = {"primary": [{"arches": ["default"], "search_dns": True}],
           "security": [{"arches": ["default"], "search_dns": True}]}
    mirrors, _ = apt_mirrors.find_mirrors(dns, "debian", {}, "web.corp.example", lambda: "amd64", check)
    assert mirrors == {"PRIMARY": "http://debian-mirror.corp.example/debian", "MIRROR":
                       "http://debian-mirror.corp.example/debian",
                       "SECURITY": "http://debian-security-mirror.localdomain/debian"}
    mirrors, _ = apt_mirrors.find_mirrors({}, "ubuntu", {}, "", lambda: "arm64", check)
    assert mirrors["PRIMARY"] == "http://ports.ubuntu.com/ubuntu-ports"


# ------------------------------------------------------------------------------ the module in a temp root
def test_mirrors_template_proxies_and_conf(target):
    target.write("/etc/apt/apt.conf.d/90cloud-init-aptproxy", 'Acquire::http::Proxy "http://old:1";\n')
    cfg = {"apt": {"primary": MIRROR, "disable_suites": ["backports"], "https_proxy": "http://sp:3129",
                   "ftp_proxy": "ftp://fp:21", "conf": 'Acquire::Retries "3";\n'}}
    result, _ = run(target, "apt_configure", cfg)
    assert result.status == "ok", result.reason
    active = apt_sources.active_lines(target.read_text("/etc/apt/sources.list"))
    assert "deb http://mirror.example.com/debian bookworm main" in active
    assert "deb http://mirror.example.com/debian bookworm-security main" in active
    assert not [line for line in active if "backports" in line]
    assert "# suite disabled by cloudseed: deb http://mirror.example.com/debian bookworm-backports main" in \
        target.read_text("/etc/apt/sources.list")
    assert target.read_text("/etc/apt/apt.conf.d/90cloud-init-aptproxy") == \
        'Acquire::ftp::Proxy "ftp://fp:21";\nAcquire::https::Proxy "http://sp:3129";\n'
    assert target.read_text("/etc/apt/apt.conf.d/94cloud-init-config") == 'Acquire::Retries "3";\n'
    # a later instance without proxies removes the snippet
    result, _ = run(target, "apt_configure", {"apt": {"preserve_sources_list": True}})
    assert result.status == "ok" and not target.exists("/etc/apt/apt.conf.d/90cloud-init-aptproxy")


def test_source_key_becomes_a_signed_by_keyring(target, key):
    cfg = {"apt": {"preserve_sources_list": True, "sources": {
        "example": {"source": "deb http://repo.example/apt $RELEASE main", "key": key.armoured},
        "templated.list": {"source": "deb [signed-by=$KEY_FILE arch=amd64] $MIRROR stable main",
                           "key": base64.b64encode(key.binary).decode()}}}}
    result, _ = run(target, "apt_configure", cfg)
    assert result.status == "ok", result.reason
    assert target.read_bytes("/etc/apt/keyrings/example.gpg") == key.binary
    assert target.read_bytes("/etc/apt/keyrings/templated.gpg") == key.binary
    assert target.read_text("/etc/apt/sources.list.d/example.list") == \
        "deb [signed-by=/etc/apt/keyrings/example.gpg] http://repo.example/apt bookworm main\n"
    assert target.read_text("/etc/apt/sources.list.d/templated.list") == \
        "deb [signed-by=/etc/apt/keyrings/templated.gpg arch=amd64] https://deb.debian.org/debian stable main\n"
    assert not target.exists("/etc/apt/trusted.gpg") and not target.listdir("/etc/apt/trusted.gpg.d")


@pytest.mark.parametrize("entry,named", [
    ({"source": "deb http://bad.example/apt stable main", "key": "CORRUPT"}, "checksum does not match"),
    ({"source": "deb http://bad.example/apt stable main", "key": "SECRET"}, "private key"),
    ({"source": "deb htp//bad.example/apt stable main"}, "is not a URI"),
    ({"source": "deb http://bad.example/apt $RELAESE main"}, "unknown variable $RELAESE"),
    ({"source": "deb [signed-by=$KEY_FILE] http://bad.example/apt stable main"}, "no key or keyid"),
    ({"source": "deb http://bad.example/apt stable main", "key": "OTHER", "keyid": "FPR"}, "does not match keyid"),
])
def test_a_bad_source_is_left_out_whole_and_named(target, key, other_key, entry, named):
    values = {"CORRUPT": corrupt(key.armoured), "SECRET": key.secret, "OTHER": other_key.armoured,
              "FPR": key.fingerprint}
    entry = {k: values.get(v, v) for k, v in entry.items()}
    cfg = {"apt": {"preserve_sources_list": True, "sources": {
        "good": {"source": "deb http://good.example/apt stable main", "key": key.armoured}, "broken": entry}}}
    result, _ = run(target, "apt_configure", cfg)
    assert result.status == "failed"
    assert "apt.sources.broken" in result.reason and named in result.reason
    assert "BEGIN PGP" not in result.reason  # never the key itself
    assert apt_files(target) == ["keyrings/good.gpg", "sources.list.d/good.list"]  # nothing of 'broken', no temp


def test_bad_sources_list_template_keeps_the_old_list(target):
    target.write("/etc/apt/sources.list", "deb http://old.example/debian bookworm main\n")
    result, _ = run(target, "apt_configure", {"apt": {"sources_list": "deb $MIRROR $RELEASE\n", "conf": "X \"1\";\n"}})
    assert result.status == "failed"
    assert "apt.sources_list line 1" in result.reason and "no component" in result.reason
    assert target.read_text("/etc/apt/sources.list") == "deb http://old.example/debian bookworm main\n"
    assert target.read_text("/etc/apt/apt.conf.d/94cloud-init-config") == "X \"1\";\n"  # the rest goes on


def test_deb822_image_keeps_its_format(target, key):
    original = ("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n"
                "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    target.write("/etc/apt/sources.list.d/debian.sources", original)
    cfg = {"apt": {"primary": MIRROR, "disable_suites": ["backports"], "sources": {
        "extra": {"source": "deb http://extra.example/apt stable main contrib", "key": key.armoured},
        "legacy": {"source": "deb http://legacy.example/apt stable main", "filename": "legacy.list"}}}}
    result, _ = run(target, "apt_configure", cfg)
    assert result.status == "ok", result.reason
    stanzas = apt_sources.parse_deb822(target.read_text("/etc/apt/sources.list.d/debian.sources"), "test")
    assert {s["URIs"] for s in stanzas} == {"http://mirror.example.com/debian"}
    assert not any("backports" in s["Suites"] for s in stanzas)
    assert {s["Signed-By"] for s in stanzas} == {"/usr/share/keyrings/debian-archive-keyring.gpg"}
    assert not target.exists("/etc/apt/sources.list")
    assert target.read_text("/etc/apt/sources.list.d/extra.sources") == (
        "Types: deb\nURIs: http://extra.example/apt\nSuites: stable\nComponents: main contrib\n"
        "Signed-By: /etc/apt/keyrings/extra.gpg\n")
    assert target.read_text("/etc/apt/sources.list.d/legacy.list") == "deb http://legacy.example/apt stable main\n"


def test_one_line_sources_list_on_deb822_image_disables_the_old_file(target):
    target.write("/etc/apt/sources.list.d/debian.sources",
                 "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n")
    result, _ = run(target, "apt_configure", {"apt": {"sources_list": "deb http://own.example/debian $RELEASE main\n"}})
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/apt/sources.list") == "deb http://own.example/debian bookworm main\n"
    assert "Enabled: no" in target.read_text("/etc/apt/sources.list.d/debian.sources")
    assert apt_sources.parse_deb822(target.read_text("/etc/apt/sources.list.d/debian.sources"), "t")  # still valid


def test_ppa_is_ubuntu_only(target):
    result, _ = run(target, "apt_configure", {"apt": {"preserve_sources_list": True,
                                                      "sources": {"x": {"source": "ppa:example/ppa"}}}})
    assert result.status == "failed" and "apt.sources.x" in result.reason and "only on Ubuntu" in result.reason


def test_ppa_goes_to_add_apt_repository_on_ubuntu(shell_target):
    shell_target.write("/etc/os-release", UBUNTU_OS_RELEASE)
    shell_target.write("/usr/bin/add-apt-repository", '#!/bin/sh\necho "$@" >> /tmp/add-apt-repository.args\n',
                       mode=0o755)
    result, _ = run(shell_target, "apt_configure", {"apt": {"preserve_sources_list": True,
                                                            "sources": {"x": {"source": "ppa:example/ppa"}}}})
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/tmp/add-apt-repository.args") == "--yes --no-update ppa:example/ppa\n"


def test_ubuntu_deb822_default_sources(target):
    target.write("/etc/os-release", UBUNTU_OS_RELEASE)
    target.write("/etc/apt/sources.list.d/ubuntu.sources", "Types: deb\nURIs: http://old/ubuntu\nSuites: noble\n"
                                                           "Components: main\n")
    target.write("/etc/apt/sources.list", "# Ubuntu sources have moved to ubuntu.sources\n")
    result, _ = run(target, "apt_configure", {"apt": {"primary": [{"arches": ["default"], "uri": "http://u/ubuntu"}]}})
    assert result.status == "ok", result.reason
    stanzas = apt_sources.parse_deb822(target.read_text("/etc/apt/sources.list.d/ubuntu.sources"), "t")
    assert stanzas[0]["Suites"] == "noble noble-updates noble-backports noble-security"
    assert stanzas[0]["Components"] == "main restricted universe multiverse"
    assert target.read_text("/etc/apt/sources.list") == "# Ubuntu sources have moved to ubuntu.sources\n"


def test_legacy_keys_convert_and_are_deprecated_in_the_schema(target):
    from cloudseed.agent.config.schema import build_module_schema
    from cloudseed.agent.config.validator import check

    cfg = {"apt_mirror": "http://legacy.example/debian", "apt_proxy": "http://p:3128",
           "apt_sources": [{"source": "deb $MIRROR $RELEASE contrib"}]}
    result, ctx = run(target, "apt_configure", cfg)
    assert result.status == "ok", result.reason
    assert "deb http://legacy.example/debian bookworm main" in target.read_text("/etc/apt/sources.list")
    assert target.read_text("/etc/apt/sources.list.d/cloud_config_sources.list") == \
        "deb http://legacy.example/debian bookworm contrib\n"
    assert any("deprecated" in w for w in ctx.warnings)
    problems = check(cfg, build_module_schema())
    assert {p.path for p in problems if p.level == "deprecated"} == {"apt_mirror", "apt_proxy", "apt_sources"}
    assert not [p for p in problems if p.level == "error"]


def test_every_documented_key_is_in_the_schema():
    from cloudseed.agent.config.schema import build_module_schema
    from cloudseed.agent.config.validator import check

    doc = {"apt": {"preserve_sources_list": False, "generate_mirrorlists": False, "disable_suites": ["updates"],
                   "primary": [{"arches": ["default"], "uri": "http://a/", "search": ["http://b/"],
                                "search_dns": True, "keyid": "ABCD1234", "key": "k", "keyserver": "ks"}],
                   "security": [{"arches": ["amd64"], "uri": "http://c/"}], "add_apt_repo_match": "^x",
                   "debconf_selections": {"a": "pkg q string v"}, "sources_list": "deb $MIRROR $RELEASE main",
                   "conf": "X;", "proxy": "http://p", "http_proxy": "http://p", "https_proxy": "http://p",
                   "ftp_proxy": "ftp://p", "sources": {"s": {"source": "deb http://x/ y z", "keyid": "ABCD1234",
                                                             "key": "k", "keyserver": "ks", "filename": "f",
                                                             "append": False}}},
           "apt_pipelining": 2, "yum_repo_dir": "/etc/yum.repos.d",
           "yum_repos": {"r": {"baseurl": "http://r/", "enabled": True, "gpgcheck": 1, "name": "R",
                               "priority": 5, "exclude": ["a", "b"]}}}
    problems = check(doc, build_module_schema())
    assert not problems, problems
    typo = check({"apt": {"sources": {"s": {"sorce": "deb x"}}}}, build_module_schema())
    assert [p.path for p in typo if p.level == "error"] == ["apt.sources.s.sorce"]


# ------------------------------------------------------------------------------ keyserver (loopback HKP)
class _Keyserver:
    def __init__(self, armoured: str, silent: bool = False):
        self.paths: list[str] = []
        parent = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                parent.paths.append(self.path)
                if silent:
                    time.sleep(5)
                    return
                body = armoured.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/pgp-keys")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_keyid_is_fetched_from_the_keyserver_and_checked(target, key, other_key):
    server = _Keyserver(key.armoured + other_key.armoured)  # an extra key the server slips in
    try:
        cfg = {"apt": {"preserve_sources_list": True, "sources": {"hkp": {
            "source": "deb [signed-by=$KEY_FILE] http://r.example/apt stable main",
            "keyid": " ".join(key.fingerprint[i:i + 4] for i in range(0, 40, 4)), "keyserver": server.url}}}}
        result, _ = run(target, "apt_configure", cfg)
    finally:
        server.close()
    assert result.status == "ok", result.reason
    assert server.paths == [f"/pks/lookup?op=get&options=mr&search=0x{key.fingerprint}"]
    assert target.read_bytes("/etc/apt/keyrings/hkp.gpg") == key.binary  # only the key asked for


def test_keyserver_with_the_wrong_key_or_no_answer_fails_in_bounded_time(target, key, other_key, monkeypatch):
    wrong = _Keyserver(other_key.armoured)
    silent = _Keyserver("", silent=True)
    monkeypatch.setattr(apt_keys, "FETCH_TIMEOUT", 0.5)
    monkeypatch.setattr(apt_keys, "FETCH_DEADLINE", 1.5)
    try:
        cfg = {"apt": {"preserve_sources_list": True, "sources": {
            "wrong": {"source": "deb http://w.example/apt stable main", "keyid": key.fingerprint,
                      "keyserver": wrong.url},
            "silent": {"source": "deb http://s.example/apt stable main", "keyid": key.fingerprint[-16:],
                       "keyserver": silent.url}}}}
        started = time.monotonic()
        result, _ = run(target, "apt_configure", cfg)
        elapsed = time.monotonic() - started
    finally:
        wrong.close()
        silent.close()
    assert result.status == "failed"
    assert "apt.sources.wrong" in result.reason and "does not match" in result.reason
    assert "apt.sources.silent" in result.reason and "no complete answer" in result.reason
    assert elapsed < 6
    assert apt_files(target) == []


# ------------------------------------------------------------------------------ real apt
class _CountingProxy:
    """A forward HTTP proxy on loopback that counts (and forwards) the requests it gets."""

    def __init__(self):
        self.requests: list[str] = []
        parent = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                parent.requests.append(self.path)
                try:
                    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(self.path,
                                                                                           timeout=10) as up:
                        body, status = up.read(), up.status
                except urllib.error.HTTPError as e:
                    body, status = b"", e.code
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def apt_repo(tmp_path):
    import shutil

    missing = [tool for tool in ("dpkg-deb", "apt-ftparchive", "gpg") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (scripts/setup.sh installs them)")
    from tests.agent.packages import repo

    repository = repo.Repository(str(tmp_path / "repo"))
    repository.add("hello-cs", "1.0")
    repository.publish()
    try:
        yield repository
    finally:
        repository.close()


def _loopback_only(root) -> None:
    """The debootstrapped root points at deb.debian.org: the tests talk to loopback only."""
    root.write("/etc/apt/sources.list", "")


def test_real_apt_accepts_a_signed_source_added_with_its_key(apt_repo, debian_root):
    from tests.agent.packages import repo

    _loopback_only(debian_root)
    with repo.serve_repository(apt_repo) as served, repo.chroot_mounts(debian_root.top):
        cfg = {"apt": {"preserve_sources_list": True, "sources": {
            "cloudseed-test": {"source": f"deb {served.url} stable main", "key": apt_repo.key_armoured}}}}
        result, _ = run(debian_root, "apt_configure", cfg)
        assert result.status == "ok", result.reason
        assert any(path.endswith("InRelease") for path in served.requests)
        policy = debian_root.run(["apt-cache", "policy", "hello-cs"]).stdout
        install = debian_root.run(["apt-get", "install", "-y", "hello-cs"], check=False,
                                  env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert "Candidate: 1.0" in policy
    assert install.returncode == 0, install.stdout + install.stderr
    assert debian_root.read_text("/usr/share/hello-cs/version") == "1.0\n"
    assert "signed-by=/etc/apt/keyrings/cloudseed-test.gpg" in \
        debian_root.read_text("/etc/apt/sources.list.d/cloudseed-test.list")


def test_real_apt_rejects_a_key_that_does_not_verify_and_it_is_taken_back(apt_repo, debian_root, other_key):
    from tests.agent.packages import repo

    _loopback_only(debian_root)
    before = apt_files(debian_root)
    with repo.serve_repository(apt_repo) as served, repo.chroot_mounts(debian_root.top):
        cfg = {"apt": {"preserve_sources_list": True, "sources": {
            "wrongkey": {"source": f"deb {served.url} stable main", "key": other_key.armoured}}}}
        result, _ = run(debian_root, "apt_configure", cfg)
    assert result.status == "failed"
    assert "apt.sources.wrongkey" in result.reason and "NO_PUBKEY" in result.reason
    assert apt_files(debian_root) == before  # no source, no keyring left behind


def test_real_apt_uses_the_configured_proxy(apt_repo, debian_root):
    from tests.agent.packages import repo

    _loopback_only(debian_root)
    proxy = _CountingProxy()
    try:
        with repo.serve_repository(apt_repo) as served, repo.chroot_mounts(debian_root.top):
            cfg = {"apt": {"preserve_sources_list": True, "proxy": proxy.url, "sources": {
                "viaproxy": {"source": f"deb {served.url} stable main", "key": apt_repo.key_armoured}}}}
            result, _ = run(debian_root, "apt_configure", cfg)
            dump = debian_root.run(["apt-config", "dump"]).stdout
    finally:
        proxy.close()
    assert result.status == "ok", result.reason
    assert f'Acquire::http::Proxy "{proxy.url}";' in dump
    assert any(r.startswith(served.url) and r.endswith("InRelease") for r in proxy.requests), proxy.requests
    assert len(proxy.requests) >= 2


def test_real_apt_reads_conf(debian_root):
    result, _ = run(debian_root, "apt_configure", {"apt": {"preserve_sources_list": True,
                                                           "conf": 'Acquire::Retries "7";\nAPT::Color "0";\n'}})
    assert result.status == "ok", result.reason
    dump = debian_root.run(["apt-config", "dump"]).stdout
    assert 'Acquire::Retries "7";' in dump and 'APT::Color "0";' in dump


# what examples 0, 2 and 4 write (example 1 and 3 have tests of their own below): the suites of
# sources.list's "deb" lines, all on the example's mirror (None: sources.list kept), and apt.conf files
EXAMPLE_WRITES = {
    0: (["bookworm", "bookworm-security", "bookworm-updates"], {}),  # backports disabled
    2: (None, {"90cloud-init-aptproxy": 'Acquire::http::Proxy "http://proxy.example.com:3128";\n',
               "94cloud-init-config": 'APT::Install-Recommends "false";\n'}),
    4: (["bookworm", "bookworm-security", "bookworm-updates", "bookworm-backports"],
        {"90cloud-init-aptproxy": 'Acquire::http::Proxy "http://proxy.example.com:3128";\n'}),
}


def test_examples_write_the_mirror_proxy_and_conf_they_show(target):
    cfgs = examples("apt_configure")
    assert len(cfgs) == 5, "a new example needs its expectation here"
    target.write("/etc/os-release", 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n')
    for index, (suites, conf) in EXAMPLE_WRITES.items():
        target.remove_tree("/etc/apt")
        target.write("/etc/apt/sources.list", "deb http://deb.debian.org/debian bookworm main\n")
        result, _ = run(target, "apt_configure", cfgs[index])
        assert result.status == "ok", f"example {index}: {result.reason}"
        debs = [line.split() for line in target.read_text("/etc/apt/sources.list").splitlines()
                if line.startswith("deb ")]
        if suites is None:
            assert debs == [["deb", "http://deb.debian.org/debian", "bookworm", "main"]], f"example {index}"
        else:
            assert [d[1] for d in debs] == ["http://mirror.example.com/debian"] * len(suites), f"example {index}"
            assert [d[2] for d in debs] == suites, f"example {index}"
        written = sorted(os.listdir(target.path("/etc/apt/apt.conf.d"))) if target.exists("/etc/apt/apt.conf.d") else []
        assert written == sorted(conf), f"example {index}"
        for name, text in conf.items():
            assert target.read_text(f"/etc/apt/apt.conf.d/{name}") == text, f"example {index}"


def test_example_with_a_placeholder_key_fails_naming_it_and_writes_no_source(target):
    """Example 1 shows where an armoured key goes with a placeholder in its place, so no root can take
    it: the key is refused by name and neither the source nor a key file is written."""
    result, _ = run(target, "apt_configure", examples("apt_configure")[1])
    assert (result.status, result.reason) == (
        "failed", "apt.sources.example: the armoured key is not valid base64 (a line was changed or cut)")
    assert not target.exists("/etc/apt/sources.list.d") or not os.listdir(target.path("/etc/apt/sources.list.d"))
    assert not target.exists("/etc/apt/cloud-init.gpg.d") or not os.listdir(target.path("/etc/apt/cloud-init.gpg.d"))


def test_example_debconf_selection_reaches_debconf(debian_root):
    result, _ = run(debian_root, "apt_configure", examples("apt_configure")[3])
    assert result.status == "ok", result.reason
    config = debian_root.read_text("/var/cache/debconf/config.dat")
    assert "Name: tzdata/Areas\nTemplate: tzdata/Areas\nValue: Europe" in config


def test_filename_outside_etc_apt_is_refused(target):
    result, _ = run(target, "apt_configure", {"apt": {"preserve_sources_list": True, "sources": {
        "x": {"source": "deb http://x/ stable main", "filename": "../../../root/evil"}}}})
    assert result.status == "failed" and "apt.sources.x" in result.reason and "outside /etc/apt" in result.reason
    assert not target.exists("/root/evil.list")


def test_one_document_adds_a_source_then_installs_from_it(apt_repo, debian_root):
    """apt_configure (config stage) before package_update_upgrade_install (final stage), as cloud-init orders them."""
    from cloudseed.agent.config import BUILTIN
    from tests.agent.packages import repo

    config, final = BUILTIN["cloud_config_modules"], BUILTIN["cloud_final_modules"]
    names = [m if isinstance(m, str) else m[0] for m in config + final]
    assert "apt_configure" in config and "package_update_upgrade_install" in final
    assert names.index("apt_configure") < names.index("package_update_upgrade_install")
    _loopback_only(debian_root)
    with repo.serve_repository(apt_repo) as served, repo.chroot_mounts(debian_root.top):
        cfg = {"apt": {"preserve_sources_list": True, "sources": {
            "vendor": {"source": f"deb {served.url} stable main", "key": apt_repo.key_armoured}}},
            "packages": ["hello-cs"]}
        configured, _ = run(debian_root, "apt_configure", cfg)
        installed, _ = run(debian_root, "package_update_upgrade_install", cfg, stage="final")
        index_fetches = [p for p in served.requests if p.endswith(("InRelease", "/Release"))]
    assert configured.status == "ok", configured.reason
    assert installed.status == "ok", installed.reason
    assert debian_root.read_text("/usr/share/hello-cs/version") == "1.0\n"
    # the lists apt_configure fetched are not fetched again by the package module in the same run
    assert len(index_fetches) == 1, index_fetches


def test_sources_are_not_repeated_on_a_second_run(target):
    cfg = {"apt": {"preserve_sources_list": True, "sources": {"x": {"source": "deb http://x.example/ stable main"}}}}
    for _ in range(2):
        result, _ = run(target, "apt_configure", cfg)
        assert result.status == "ok", result.reason
    assert target.read_text("/etc/apt/sources.list.d/x.list") == "deb http://x.example/ stable main\n"


def test_real_debconf_selections(debian_root):
    cfg = {"apt": {"preserve_sources_list": True, "debconf_selections": {
        "tz": "tzdata tzdata/Areas select Europe\ntzdata tzdata/Zones/Europe select Berlin"}}}
    result, _ = run(debian_root, "apt_configure", cfg)
    assert result.status == "ok", result.reason
    config = debian_root.read_text("/var/cache/debconf/config.dat")
    assert "Name: tzdata/Zones/Europe\nTemplate: tzdata/Zones/Europe\nValue: Berlin" in config


def test_real_apt_source_that_does_not_answer_is_named_and_taken_back(apt_repo, debian_root):
    """A silent server: apt gives up within its configured timeout; the source is named and removed."""
    from tests.agent.packages import repo

    _loopback_only(debian_root)
    with repo.silent_server() as url, repo.chroot_mounts(debian_root.top):
        cfg = {"apt": {"preserve_sources_list": True, "conf": 'Acquire::http::Timeout "2";\nAcquire::Retries "0";\n',
                       "sources": {"silent": {"source": f"deb {url} stable main", "key": apt_repo.key_armoured}}}}
        started = time.monotonic()
        result, _ = run(debian_root, "apt_configure", cfg)
        elapsed = time.monotonic() - started
    assert result.status == "failed"
    assert "apt.sources.silent" in result.reason and url in result.reason
    assert elapsed < 60
    assert not debian_root.exists("/etc/apt/sources.list.d/silent.list")
    assert not debian_root.exists("/etc/apt/keyrings/silent.gpg")
    assert debian_root.exists("/etc/apt/apt.conf.d/94cloud-init-config")  # the rest stays


def test_real_apt_takes_back_only_the_rejected_source_of_a_shared_file(apt_repo, debian_root, other_key):
    """Legacy apt_sources entries share cloud_config_sources.list: only the rejected one's line goes."""
    from tests.agent.packages import repo

    _loopback_only(debian_root)
    with repo.serve_repository(apt_repo) as served, repo.serve_repository(apt_repo) as second, \
            repo.chroot_mounts(debian_root.top):
        good = f"deb [signed-by=/etc/apt/keyrings/good.gpg] {served.url} stable main"
        debian_root.write("/etc/apt/keyrings/good.gpg", apt_repo.key_binary)
        cfg = {"apt_preserve_sources_list": True, "apt_sources": [
            {"source": good},
            {"source": f"deb {second.url} stable main", "key": other_key.armoured}]}
        result, _ = run(debian_root, "apt_configure", cfg)
    assert result.status == "failed"
    assert result.reason.startswith("apt_sources[1]: apt-get update rejected it") and "NO_PUBKEY" in result.reason
    assert debian_root.read_text("/etc/apt/sources.list.d/cloud_config_sources.list") == good + "\n"
    assert not debian_root.exists("/etc/apt/keyrings/cloud_config_sources.gpg")
