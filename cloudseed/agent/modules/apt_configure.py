"""apt_configure: apt sources, mirrors, keys, proxies, apt.conf snippets and debconf selections.

The ``apt:`` mapping (and cloud-init's older top-level keys, converted and flagged deprecated):
``debconf_selections`` go to the target's ``debconf-set-selections``; unless
``preserve_sources_list`` the distro's sources are written for the chosen ``primary`` /
``security`` mirrors (a ``sources_list`` template, or the packaged one), with ``disable_suites``
commented out, in the image's own format (``/etc/apt/sources.list``, or deb822
``sources.list.d/debian.sources`` / ``ubuntu.sources`` where the image has that file);
``proxy``/``http_proxy``/``https_proxy``/``ftp_proxy`` and ``conf`` become apt.conf.d snippets
(the file names cloud-init uses, so an image switched from cloud-init keeps one copy); each
``sources`` entry becomes a ``sources.list.d`` file (``.sources`` on deb822 images) whose key
(``key``, or ``keyid`` fetched from ``keyserver``) is a binary keyring in ``/etc/apt/keyrings``
named by the entry's ``signed-by``, and ``apt-get update`` runs once the sources changed.

Everything is checked before anything is written: a source whose key does not parse or verify,
or whose line apt would reject, is left out whole (no key without its source, no source without
its key) and the module fails naming it; the other sources are still written.
"""

from __future__ import annotations

import posixpath
import re

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules import _apt_sources as apt_sources
from cloudseed.core.root import CommandError
from cloudseed.core.values import as_bool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROXY_FILE = "/etc/apt/apt.conf.d/90cloud-init-aptproxy"
CONFIG_FILE = "/etc/apt/apt.conf.d/94cloud-init-config"
SOURCES_LIST = "/etc/apt/sources.list"
SOURCES_DIR = "/etc/apt/sources.list.d"
KEYRING_DIR = "/etc/apt/keyrings"
TRUSTED_DIR = "/etc/apt/trusted.gpg.d"
MIRROR_LIST_DIR = "/etc/apt/mirrors"
ADD_APT_REPO_MATCH = r"^[\w-]+:\w"
UPDATE_TIMEOUT = 300
SUITE_ALIASES = {"updates": "$RELEASE-updates", "backports": "$RELEASE-backports",
                 "security": "$RELEASE-security", "proposed": "$RELEASE-proposed", "release": "$RELEASE"}
# cloud-init's top-level keys from before ``apt:`` and where they go
LEGACY_KEYS = {
    "apt_sources": "sources", "apt_proxy": "proxy", "apt_http_proxy": "http_proxy",
    "apt_https_proxy": "https_proxy", "apt_ftp_proxy": "ftp_proxy",
    "apt_preserve_sources_list": "preserve_sources_list", "apt_custom_sources_list": "sources_list",
    "add_apt_repo_match": "add_apt_repo_match", "debconf_selections": "debconf_selections",
}
LEGACY_MIRROR_KEYS = {"apt_mirror": "uri", "apt_mirror_search": "search", "apt_mirror_search_dns": "search_dns"}

_KEY_PROPS = {
    "keyid": {"type": "string", "description": "Id or fingerprint of a key fetched from ``keyserver``."},
    "key": {"type": "string", "description": "An OpenPGP public key (armoured, or base64 of the binary key)."},
    "keyserver": {"type": "string", "description": "HKP keyserver for ``keyid`` (default keyserver.ubuntu.com; "
                                                   "hkp://, hkps://, http:// or https://)."},
}
_MIRROR = {
    "type": "array", "minItems": 1,
    "items": {"type": "object", "required": ["arches"], "additionalProperties": False, "properties": {
        "arches": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                   "description": "dpkg architectures this entry is for; ``default`` for all others."},
        "uri": {"type": "string", "description": "The mirror's URL."},
        "search": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                   "description": "Candidate mirror URLs; the first whose host resolves is used."},
        "search_dns": {"type": "boolean", "description": "Look for ``<distro>-mirror`` (``<distro>-security-mirror``) "
                                                         "in the instance's domain, then localdomain."},
        **_KEY_PROPS,
    }},
}
_SOURCE = {"type": "object", "additionalProperties": False, "properties": {
    "source": {"type": "string", "description": "A sources.list line (or a deb822 stanza); $MIRROR, $PRIMARY, "
                                                "$SECURITY, $RELEASE and $KEY_FILE are replaced."},
    **_KEY_PROPS,
    "filename": {"type": "string", "description": "File name in /etc/apt/sources.list.d (default: the entry's name)."},
    "append": {"type": "boolean", "description": "Add to the file (default) rather than replace it."},
}}
_DEBCONF = {"type": "object", "additionalProperties": {"type": "string"},
            "description": "Named sets of debconf-set-selections lines (``pkg question type value``)."}
_APT = {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": {
    "preserve_sources_list": {"type": "boolean", "description": "Keep the image's sources as they are."},
    "generate_mirrorlists": {"type": "boolean", "description": "Write /etc/apt/mirrors/<distro>.list and "
                                                              "<distro>-security.list for apt's mirror+file method."},
    "disable_suites": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                       "description": "Suites to comment out (updates, backports, security, proposed, release, "
                                      "or a suite name; $RELEASE is replaced)."},
    "primary": dict(_MIRROR, description="The primary archive mirror per architecture."),
    "security": dict(_MIRROR, description="The security archive mirror per architecture (default: primary)."),
    "add_apt_repo_match": {"type": "string", "description": "Sources matching this regex go to add-apt-repository "
                                                            "(Ubuntu); default ^[\\w-]+:\\w (ppa:...)."},
    "debconf_selections": _DEBCONF,
    "sources_list": {"type": "string", "description": "Template of the sources list ($MIRROR, $PRIMARY, $SECURITY, "
                                                      "$RELEASE, $KEY_FILE; or a '## template: jinja' template)."},
    "conf": {"type": "string", "description": "apt.conf text written to /etc/apt/apt.conf.d/94cloud-init-config."},
    "proxy": {"type": "string", "description": "HTTP proxy for apt (same as http_proxy)."},
    "http_proxy": {"type": "string", "description": "HTTP proxy for apt (Acquire::http::Proxy)."},
    "https_proxy": {"type": "string", "description": "HTTPS proxy for apt (Acquire::https::Proxy)."},
    "ftp_proxy": {"type": "string", "description": "FTP proxy for apt (Acquire::ftp::Proxy)."},
    "sources": {"type": "object", "additionalProperties": _SOURCE,
                "description": "Extra sources, by name (the file name in /etc/apt/sources.list.d). Each entry: "
                               "source (a sources.list line or deb822 stanza), key or keyid (+ keyserver), "
                               "filename, append (default true)."},
}}


def _legacy(schema: dict, replacement: str, description: str = "") -> dict:
    return dict(schema, deprecated=True, deprecated_description=f"Use {replacement}.",
                **({"description": description} if description else {}))


MODULE = ModuleSpec(
    name="apt_configure", stage=STAGE_CONFIG, distros=("debian",),
    activate_by=("apt", *LEGACY_KEYS, *LEGACY_MIRROR_KEYS),
    title="Configure apt sources, mirrors, keys, proxies and debconf",
    schema={"properties": {
        "apt": dict(_APT, description="apt configuration: mirrors, sources, keys, proxies, apt.conf, debconf."),
        "apt_mirror": _legacy({"type": "string"}, "apt.primary[].uri", "The archive mirror's URL."),
        "apt_mirror_search": _legacy({"type": "array", "items": {"type": "string"}}, "apt.primary[].search",
                                     "Candidate mirror URLs."),
        "apt_mirror_search_dns": _legacy({"type": "boolean"}, "apt.primary[].search_dns", "Look for a mirror in DNS."),
        "apt_sources": _legacy({"type": ["array", "object"]}, "apt.sources",
                               "Extra sources (a list: entries without filename share cloud_config_sources.list)."),
        "apt_proxy": _legacy({"type": "string"}, "apt.proxy", "HTTP proxy for apt."),
        "apt_http_proxy": _legacy({"type": "string"}, "apt.http_proxy", "HTTP proxy for apt."),
        "apt_https_proxy": _legacy({"type": "string"}, "apt.https_proxy", "HTTPS proxy for apt."),
        "apt_ftp_proxy": _legacy({"type": "string"}, "apt.ftp_proxy", "FTP proxy for apt."),
        "apt_preserve_sources_list": _legacy({"type": "boolean"}, "apt.preserve_sources_list",
                                             "Keep the image's sources."),
        "apt_custom_sources_list": _legacy({"type": "string"}, "apt.sources_list", "Template of the sources list."),
        "add_apt_repo_match": _legacy({"type": "string"}, "apt.add_apt_repo_match",
                                      "Regex of sources given to add-apt-repository."),
        "debconf_selections": _legacy(_DEBCONF, "apt.debconf_selections"),
    }},
    examples=(
        "apt:\n  primary:\n    - arches: [default]\n      uri: http://mirror.example.com/debian\n"
        "  disable_suites: [backports]\n",
        "apt:\n  preserve_sources_list: true\n  sources:\n    example:\n"
        "      source: deb [signed-by=$KEY_FILE] http://repo.example.com/apt $RELEASE main\n"
        "      key: |\n        -----BEGIN PGP PUBLIC KEY BLOCK-----\n        (the armoured key)\n"
        "        -----END PGP PUBLIC KEY BLOCK-----\n",
        "apt:\n  preserve_sources_list: true\n  http_proxy: http://proxy.example.com:3128\n"
        "  conf: |\n    APT::Install-Recommends \"false\";\n",
        "apt:\n  debconf_selections:\n    tz: tzdata tzdata/Areas select Europe\n",
        "apt_mirror: http://mirror.example.com/debian\napt_proxy: http://proxy.example.com:3128\n",
    ),
)


class _Plan:
    """The files to write (in order) and to remove, gathered before anything is written."""

    def __init__(self, ctx: ModuleContext, parent: _Plan | None = None):
        self.ctx = ctx
        self.parent = parent  # a source's own plan reads what the module's plan will already write
        self.writes: dict[str, tuple[bytes, int]] = {}
        self.removes: list[str] = []
        self.uris: list[str] = []  # the repositories a source's plan adds (to blame apt's errors on it)
        self.originals: dict[str, bytes | None] = {}
        self.added: dict[str, str] = {}  # the text a source added to a sources file (taken out if rejected)

    def current(self, path: str) -> str:
        if path in self.writes:
            return self.writes[path][0].decode("utf-8", errors="replace")
        if self.parent is not None:
            return self.parent.current(path)
        return self.ctx.root.read_text(path, default="")

    def write(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        data = content.encode("utf-8") if isinstance(content, str) else content
        self.writes[path] = (data, mode)
        if path in self.removes:
            self.removes.remove(path)

    def merge(self, other: _Plan) -> None:
        for path, item in other.writes.items():
            self.writes[path] = item

    def commit(self) -> None:
        for path, (data, mode) in self.writes.items():
            self.ctx.root.write(path, data, mode=mode)
        for path in self.removes:
            self.ctx.root.remove(path)


# --------------------------------------------------------------------------- configuration
def effective_config(ctx: ModuleContext) -> dict[str, Any]:
    """``apt:`` with the legacy top-level keys converted (ignored, with a warning, when ``apt:`` is set)."""
    cfg = ctx.cfg
    apt = cfg.get("apt")
    if apt is not None and not isinstance(apt, dict):
        raise ModuleError(f"apt: expected a mapping, got {type(apt).__name__}")
    legacy = [k for k in (*LEGACY_KEYS, *LEGACY_MIRROR_KEYS) if cfg.get(k) not in (None, "")]
    if not legacy:
        return dict(apt or {})
    if apt is not None:
        ctx.warn(f"{', '.join(legacy)} ignored: deprecated, and the 'apt' key is set (it wins)")
        return dict(apt)
    ctx.warn(f"{', '.join(legacy)}: deprecated top-level keys; use the 'apt' key")
    converted: dict[str, Any] = {}
    for old, new in LEGACY_KEYS.items():
        if cfg.get(old) not in (None, ""):
            converted[new] = cfg[old]
    if isinstance(converted.get("sources"), list):
        converted["sources"] = _listed_sources(converted["sources"])
    mirror = {new: cfg[old] for old, new in LEGACY_MIRROR_KEYS.items() if cfg.get(old) not in (None, "")}
    if mirror:
        converted["primary"] = [dict(mirror, arches=["default"])]
    return converted


def _listed_sources(items: list) -> dict[str, Any]:
    """``apt_sources`` as a list: entries without a filename share cloud_config_sources.list."""
    out: dict[str, Any] = {}
    for index, item in enumerate(items):
        entry = dict(item) if isinstance(item, dict) else {"source": item}
        entry.setdefault("filename", "cloud_config_sources.list")
        out[f"apt_sources[{index}]"] = entry  # the name errors are reported under
    return out


def _fqdn(ctx: ModuleContext) -> str:
    for key in ("fqdn", "hostname"):
        value = ctx.cfg.get(key)
        if isinstance(value, str) and "." in value:
            return value
    hostname = getattr(ctx.datasource, "local_hostname", None) if ctx.datasource is not None else None
    return str(hostname or "")


# --------------------------------------------------------------------------- handler
def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.modules import _apt_mirrors as apt_mirrors

    apt = effective_config(ctx)
    problems: list[str] = []
    distro_id = ctx.distro.id if ctx.distro.id in ("debian", "ubuntu") else (
        "ubuntu" if "ubuntu" in ctx.distro.os_release.get("ID_LIKE", "") else "debian")
    release = apt_mirrors.release_codename(ctx.root, ctx.distro.os_release)
    arch_cache: list[str] = []

    def arch() -> str:
        if not arch_cache:
            arch_cache.append(apt_mirrors.dpkg_architecture(ctx.root))
        return arch_cache[0]

    _debconf(ctx, apt.get("debconf_selections"), problems)
    mirrors, entries = apt_mirrors.find_mirrors(apt, distro_id, ctx.distro.system_info, _fqdn(ctx), arch)
    params = {"RELEASE": release, "MIRROR": mirrors["MIRROR"], "PRIMARY": mirrors["PRIMARY"],
              "SECURITY": mirrors["SECURITY"]}
    plan = _Plan(ctx)
    if as_bool(apt.get("generate_mirrorlists"), False):
        plan.write(f"{MIRROR_LIST_DIR}/{distro_id}.list", mirrors["PRIMARY"] + "\n")
        plan.write(f"{MIRROR_LIST_DIR}/{distro_id}-security.list", mirrors["SECURITY"] + "\n")
    elif not as_bool(apt.get("preserve_sources_list"), False):
        try:
            main = _main_sources(ctx, apt, distro_id, release, params, entries)
            plan.merge(main)
        except (apt_sources.SourceError, _KeyProblem) as e:
            problems.append(f"{e}; the sources list was left as it was")
    _apt_conf(plan, apt)
    commands: list[tuple[str, list[str]]] = []
    sources = apt.get("sources")
    added: list[tuple[str, _Plan]] = []
    if sources not in (None, {}):
        if not isinstance(sources, dict):
            problems.append("apt.sources: expected a mapping of name -> entry")
        else:
            matcher = re.compile(str(apt.get("add_apt_repo_match") or ADD_APT_REPO_MATCH)).search
            for name, entry in sources.items():
                try:
                    sub, command = _source(plan, str(name), entry, params, distro_id, matcher)
                except (apt_sources.SourceError, _KeyProblem) as e:
                    problems.append(str(e))
                    continue
                plan.merge(sub)
                added.append((str(name), sub))
                if command:
                    commands.append((f"apt.sources.{name}", command))
    for _name, sub in added:  # what each source's files held before, to take a rejected source back
        sub.originals = {path: (ctx.root.read_bytes(path) if ctx.root.isfile(path) else None)
                         for path in sub.writes}
    plan.commit()
    for where, argv in commands:
        try:
            ctx.root.run(argv, timeout=UPDATE_TIMEOUT, env=_apt_env())
        except CommandError as e:
            problems.append(f"{where}: {e}")
    if any(sub.writes for _name, sub in added) or commands:
        _update(ctx, problems, added)
    ctx.log.info("apt configured: %d file(s) written%s", len(plan.writes),
                 f", {len(problems)} problem(s)" if problems else "")
    if problems:
        raise ModuleError("; ".join(problems))


def _apt_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["DEBIAN_FRONTEND"] = "noninteractive"
    return env


def _update(ctx: ModuleContext, problems: list[str], added: list[tuple[str, _Plan]]) -> None:
    """``apt-get update`` after the sources changed (as cloud-init does), when apt is installed.

    A new source apt rejects (not signed by its key, not answering, no such suite) is taken back:
    its files are restored to what they were, so later apt runs do not trip on it.
    """
    if not ctx.root.which("apt-get"):
        ctx.log.info("apt-get is not installed in the target; package lists not updated")
        return
    try:
        proc = ctx.root.run(["apt-get", "update"], timeout=UPDATE_TIMEOUT, env=_apt_env(), check=False)
    except CommandError as e:
        problems.append(f"apt-get update after adding sources: {e}")
        return
    lines = [line.strip() for line in (proc.stdout + "\n" + proc.stderr).splitlines()
             if line.startswith(("E:", "W:", "Err:"))]
    blamed = False
    for name, sub in added:
        bad = [line for line in lines if any(uri in line for uri in sub.uris)]
        if not bad:
            continue
        blamed = True
        best = next((line for line in bad if "NO_PUBKEY" in line), None) or \
            next((line for line in bad if line.startswith("E:")), bad[0])
        _take_back(ctx, sub)
        where = name if name.startswith("apt_sources[") else f"apt.sources.{name}"
        problems.append(f"{where}: apt-get update rejected it ({best}); its files were taken back")
    if proc.returncode != 0 and not blamed:
        problems.append("apt-get update after adding sources failed: " + (" | ".join(lines[:6]) or
                                                                          f"exit status {proc.returncode}"))
    elif proc.returncode == 0 and not blamed:
        from cloudseed.agent.package_managers.base import note_refreshed

        note_refreshed(ctx.root, "apt")   # package_update in the final stage need not fetch the lists again


def _take_back(ctx: ModuleContext, sub: _Plan) -> None:
    """Undo one source: its keyring as it was, its text out of its sources file (other sources' stay)."""
    for path, data in sub.originals.items():
        if path not in sub.added:
            if data is None:
                ctx.root.remove(path)
            else:
                ctx.root.write(path, data, mode=0o644, keep_mode=True)
            continue
        current = ctx.root.read_text(path, default="")
        text = sub.added[path]
        if path.endswith(".sources"):
            remaining = current.replace(text, "") if text.strip() else current
        else:
            mine = set(text.splitlines())
            remaining = "".join(line for line in current.splitlines(True) if line.rstrip("\n") not in mine)
        if remaining.strip() or data is not None:
            ctx.root.write(path, remaining, mode=0o644, keep_mode=True)
        else:
            ctx.root.remove(path)


# --------------------------------------------------------------------------- debconf
def _debconf(ctx: ModuleContext, selections: Any, problems: list[str]) -> None:
    if not selections:
        return
    if not isinstance(selections, dict) or not all(isinstance(v, str) for v in selections.values()):
        problems.append("apt.debconf_selections: expected a mapping of name -> selection lines")
        return
    text = "\n".join(selections[key] for key in sorted(selections))
    if not text.endswith("\n"):
        text += "\n"
    if not ctx.root.which("debconf-set-selections"):
        problems.append("apt.debconf_selections: debconf-set-selections is not installed on the target")
        return
    try:
        ctx.root.run(["debconf-set-selections"], input=text, timeout=120)
    except CommandError as e:
        problems.append(f"apt.debconf_selections: {e}")


# --------------------------------------------------------------------------- apt.conf snippets
def _apt_conf(plan: _Plan, apt: dict) -> None:
    lines = [f'Acquire::{scheme}::Proxy "{apt[key]}";'
             for key, scheme in (("proxy", "http"), ("http_proxy", "http"), ("ftp_proxy", "ftp"),
                                 ("https_proxy", "https")) if apt.get(key)]
    if lines:
        plan.write(PROXY_FILE, "\n".join(lines) + "\n")
    elif plan.ctx.root.isfile(PROXY_FILE):
        plan.removes.append(PROXY_FILE)
    if apt.get("conf"):
        plan.write(CONFIG_FILE, str(apt["conf"]))
    elif plan.ctx.root.isfile(CONFIG_FILE):
        plan.removes.append(CONFIG_FILE)


# --------------------------------------------------------------------------- keys
class _KeyProblem(Exception):
    """A key for a source or mirror could not be used; the message names where it was configured."""


def _key_of(entry: dict, where: str) -> bytes | None:
    """The binary keyring ``entry`` asks for (``key``, or ``keyid`` from ``keyserver``); None without one."""
    from cloudseed.agent.modules import _apt_keys as apt_keys

    try:
        if entry.get("key"):
            data = apt_keys.load_key(entry["key"])
            if entry.get("keyid"):
                wanted = apt_keys.normal_keyid(entry["keyid"])
                if not any(k.matches(wanted) for k in apt_keys.parse_keys(data)):
                    raise apt_keys.KeyError_(f"key does not match keyid {wanted}")
            return data
        if entry.get("keyid"):
            return apt_keys.fetch_key(entry["keyid"], entry.get("keyserver"))
    except apt_keys.KeyError_ as e:
        raise _KeyProblem(f"{where}: {e}") from None
    return None


# --------------------------------------------------------------------------- the distro's sources
def _deb822_file(ctx: ModuleContext, distro_id: str) -> str | None:
    """The image's deb822 distro sources file (``debian.sources`` / ``ubuntu.sources``), if it has one."""
    for name in (distro_id, "debian", "ubuntu"):
        path = f"{SOURCES_DIR}/{name}.sources"
        if ctx.root.isfile(path):
            return path
    return None


def _is_deb822(text: str) -> bool:
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            return bool(re.match(r"^[A-Za-z][A-Za-z0-9-]*:(\s|$)", line))
    return False


def _main_sources(ctx: ModuleContext, apt: dict, distro_id: str, release: str, params: dict[str, str],
                  entries: dict[str, dict | None]) -> _Plan:
    from cloudseed.agent.modules import _system_templates as system_templates

    plan = _Plan(ctx)
    template = apt.get("sources_list")
    key_files: dict[str, str] = {}
    uses_key_file = isinstance(template, str) and "KEY_FILE" in template
    for kind in ("primary", "security"):
        entry = entries.get(kind)
        data = _key_of(entry, f"apt.{kind}") if entry else None
        if data:
            key_files[kind] = f"{KEYRING_DIR if uses_key_file else TRUSTED_DIR}/{kind}.gpg"
            plan.write(key_files[kind], data)
    values = dict(params)
    if "primary" in key_files:
        values["KEY_FILE"] = key_files["primary"]
    if not release:
        raise apt_sources.SourceError("apt: cannot tell the release codename (no VERSION_CODENAME in "
                                      "/etc/os-release) for the sources list")
    suites = [apt_sources.substitute(SUITE_ALIASES.get(s, s), values, "apt.disable_suites")
              for s in (apt.get("disable_suites") or [])]
    deb822_file = _deb822_file(ctx, distro_id)
    if template is None:
        lower = {k.lower(): v for k, v in values.items()}
        lower.update(codename=release, security_suite=f"{release}/updates" if release in ("stretch", "buster")
                     else f"{release}-security")
        try:
            rendered = system_templates.render_named(ctx.root, f"sources.list.{distro_id}", {**values, **lower})
        except system_templates.TemplateError as e:
            raise apt_sources.SourceError(f"apt: {e}") from None
        where = "the sources.list template"
    else:
        where = "apt.sources_list"
        if str(template).lstrip().startswith("## template:"):
            lower = {k.lower(): v for k, v in values.items()}
            try:
                rendered = system_templates.render(str(template), {**values, **lower, "codename": release},
                                                   where)
            except system_templates.TemplateError as e:
                raise apt_sources.SourceError(str(e)) from None
        else:
            rendered = apt_sources.substitute(str(template), values, where)
    if _is_deb822(rendered):
        apt_sources.parse_deb822(rendered, where)
        target = deb822_file or f"{SOURCES_DIR}/{distro_id}.sources"
        plan.write(target, apt_sources.disable_suites_deb822(rendered, suites) if suites else rendered)
        _point_sources_list(plan, target)
        return plan
    apt_sources.check_text(rendered, where)
    text = apt_sources.disable_suites(rendered, suites) if suites else rendered
    if template is None and deb822_file:  # the image's own format
        entries_822 = [apt_sources.parse_line(line) for line in apt_sources.active_lines(text)]
        keyring = _image_keyring(ctx.root.read_text(deb822_file), deb822_file)
        for entry in entries_822:  # the archive keyring the image's stanzas named still signs the archive
            if keyring and entry.option("signed-by") is None:
                entry.set_option("signed-by", keyring)
        header = f"# {deb822_file}: the archive sources, written by cloudseed from cloud-config (apt: ...)\n"
        if suites:
            header += f"# disabled suites: {' '.join(suites)}\n"
        plan.write(deb822_file, header + "\n" + apt_sources.to_deb822(entries_822))
        _point_sources_list(plan, deb822_file)
        return plan
    plan.write(SOURCES_LIST, text)
    if deb822_file:  # the user's one-line list replaces the image's deb822 sources
        current = ctx.root.read_text(deb822_file)
        plan.write(deb822_file, apt_sources.disable_all_deb822(
            current, f"disabled by cloudseed: apt.sources_list in {SOURCES_LIST} replaces these sources"))
    return plan


def _image_keyring(text: str, where: str) -> str | None:
    """The one Signed-By the image's deb822 archive stanzas share (None when none or several)."""
    try:
        stanzas = apt_sources.parse_deb822(text, where)
    except apt_sources.SourceError:
        return None
    values = {v.strip() for s in stanzas for k, v in s.items() if k.lower() == "signed-by"}
    return values.pop() if len(values) == 1 and "\n" not in next(iter(values)) else None


def _point_sources_list(plan: _Plan, deb822_file: str) -> None:
    """An /etc/apt/sources.list with entries would repeat the deb822 sources: leave only a pointer."""
    if apt_sources.active_lines(plan.current(SOURCES_LIST)):
        plan.write(SOURCES_LIST, f"# The archive sources are in {deb822_file} (deb822 format).\n")


# --------------------------------------------------------------------------- apt.sources entries
def _stem(filename: str) -> str:
    base = filename.rstrip("/").rsplit("/", 1)[-1]
    for suffix in (".list", ".sources"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base.rsplit(".", 1)[0] if "." in base else base


def _source(parent: _Plan, name: str, entry: Any, params: dict[str, str], distro_id: str,
            matcher: Any) -> tuple[_Plan, list[str] | None]:
    """The files (and add-apt-repository command) of one ``apt.sources`` entry, all checked."""
    where = name if name.startswith("apt_sources[") else f"apt.sources.{name}"
    if not isinstance(entry, dict):
        raise apt_sources.SourceError(f"{where}: expected a mapping (source, key, keyid, filename...)")
    ctx = parent.ctx
    plan = _Plan(ctx, parent)
    filename = str(entry.get("filename") or name)
    stem = _stem(filename)
    if not stem or stem in (".", ".."):
        raise apt_sources.SourceError(f"{where}: {filename!r} is not a usable file name")
    source = entry.get("source")
    if source is None or matcher(str(source)):
        command = _add_apt_repository(ctx, where, str(source), distro_id) if source is not None else None
        key = _key_of(entry, where)
        if key:  # a key on its own (or for add-apt-repository), as cloud-init adds it: trusted for every source
            plan.write(f"{TRUSTED_DIR}/{stem}.gpg", key)
        return plan, command
    source = str(source)
    has_key = bool(entry.get("key") or entry.get("keyid"))
    keyring = f"{KEYRING_DIR}/{stem}.gpg" if has_key else None
    if "KEY_FILE" in source and not keyring:
        raise apt_sources.SourceError(f"{where}: the source uses $KEY_FILE but the entry has no key or keyid")
    text = apt_sources.substitute(source, dict(params, KEY_FILE=keyring or ""), f"{where}.source")
    if _is_deb822(text):
        content = _deb822_source(text, keyring, where)
        deb822 = True
    else:
        lines = _one_line_source(ctx, text, keyring, where)
        deb822 = filename.endswith(".sources") or (
            not filename.endswith(".list") and _deb822_file(ctx, distro_id) is not None)
        content = (apt_sources.to_deb822([apt_sources.parse_line(line) for line in lines]) if deb822
                   else "\n".join(lines) + "\n")
    plan.uris = _uris(content, deb822)
    suffix = ".sources" if deb822 else ".list"
    path = posixpath.normpath(filename if filename.startswith("/") else f"{SOURCES_DIR}/{filename}")
    if not path.startswith("/etc/apt/"):
        raise apt_sources.SourceError(f"{where}: filename {filename!r} leads outside /etc/apt")
    if not path.endswith(suffix):
        path = (path[: -len(".list")] if path.endswith(".list") else path) + suffix
    if keyring:  # fetched or read only once the source itself is known to be good
        plan.write(keyring, _key_of(entry, where) or b"")
    plan.added = {path: content}
    if as_bool(entry.get("append"), True):
        current = plan.current(path)
        if deb822:
            if content.strip() in current:
                plan.added = {}
                content = current
            elif current.strip():
                content = current.rstrip("\n") + "\n\n" + content
        else:
            have = set(current.splitlines())
            new = [line for line in content.splitlines() if line not in have]
            plan.added = {path: "".join(line + "\n" for line in new)}
            content = current + ("" if not current or current.endswith("\n") else "\n") + plan.added[path]
    plan.write(path, content)
    return plan, None


def _uris(content: str, deb822: bool) -> list[str]:
    if deb822:
        return [uri.rstrip("/") for stanza in apt_sources.parse_deb822(content, "source")
                for key, value in stanza.items() if key.lower() == "uris" for uri in value.split()]
    return [apt_sources.parse_line(line).uri.rstrip("/") for line in apt_sources.active_lines(content)]


def _one_line_source(ctx: ModuleContext, text: str, keyring: str | None, where: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if not line.split("#", 1)[0].strip():
            continue
        try:
            parsed = apt_sources.parse_line(line)
        except apt_sources.SourceError as e:
            raise apt_sources.SourceError(f"{where}.source: {e}") from None
        signed_by = parsed.option("signed-by")
        if keyring and signed_by is None:
            parsed.set_option("signed-by", keyring)
            line = parsed.one_line()
        elif keyring and signed_by != keyring:
            ctx.warn(f"{where}: the source names its own signed-by={signed_by}; the key given is in {keyring}")
        lines.append(line.strip())
    if not lines:
        raise apt_sources.SourceError(f"{where}.source: no source line in it")
    return lines


def _deb822_source(text: str, keyring: str | None, where: str) -> str:
    stanzas = apt_sources.parse_deb822(text, f"{where}.source")
    if not stanzas:
        raise apt_sources.SourceError(f"{where}.source: no stanza in it")
    if keyring and not any(k.lower() == "signed-by" for s in stanzas for k in s):
        text = re.sub(r"(?m)^(Types:.*)$", lambda m: f"{m.group(1)}\nSigned-By: {keyring}", text)
    return text if text.endswith("\n") else text + "\n"


def _add_apt_repository(ctx: ModuleContext, where: str, source: str, distro_id: str) -> list[str]:
    if distro_id != "ubuntu":
        raise apt_sources.SourceError(
            f"{where}: {source!r} is an add-apt-repository shortcut (like ppa:); these work only on Ubuntu. "
            "Give a 'deb URI suite component' line instead")
    if not ctx.root.which("add-apt-repository"):
        raise apt_sources.SourceError(f"{where}: {source!r} needs add-apt-repository, which is not installed "
                                      "(package software-properties-common)")
    return ["add-apt-repository", "--yes", "--no-update", source]
