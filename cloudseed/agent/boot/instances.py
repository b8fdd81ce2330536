"""Finding and adopting a datasource's instance, and the datasource cache later stages and boots read.

Finding tries the configured ``datasource_list`` (``ci.ds=`` on the command line wins) less the
datasources the generator found cannot exist here.

Adopting records the instance this boot serves: its directory under
``/var/lib/cloudseed/instances``, the ``instance`` link, the current and previous instance ids,
and ``/run/cloudseed/boot.json``. The datasource found is cached (0600: it holds user-data) for
this boot in ``/run/cloudseed/datasource.json`` and for the instance in its directory; its
``format`` version is checked on read (an unknown one: a log line and a fresh search). On a reboot
of the same instance nothing on disk that is already right is written again (the ``instance``
link, the instance's cache when the datasource says the same): writes are fsyncs on the boot's path.
"""

from __future__ import annotations

import logging

from cloudseed.agent.datasources import NETWORK
from cloudseed.agent.state import ensure_dirs, json_text, write_json
from cloudseed.agent.state.files import ensure_dir, load_json, load_line, object_problem, set_aside

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from cloudseed.agent.boot.boot_state import BootState
    from cloudseed.agent.datasources import Datasource

LOG = logging.getLogger("cloudseed.instances")

# the versions of the datasource cache (``Datasource.to_json``'s "format") this version reads
CACHE_FORMATS = (1,)


def same_instance_as_last_boot(state: BootState) -> Datasource | None:
    """The last boot's datasource when local facts say this is still that instance, else None.

    Like cloud-init's ``check_instance_id``: the platform's SMBIOS system UUID (Nova sets it to the
    instance's uuid) equals the cached instance id. Then the boot searches no further; per-boot
    work runs from the cache. Anything else (no cache, another UUID, no DMI) means a search.
    """
    uuid = state.root.read_text("/sys/class/dmi/id/product_uuid", default="").strip().lower()
    if not uuid or not state.root.exists(state.paths.current_instance_file):
        return None
    previous = (last_instance_id(state) or "").lower()
    if previous != uuid:
        return None
    ds = load_datasource(state)  # the boot's own cache is gone at this point: the instance's
    if ds is None or ds.instance_id.lower() != uuid:
        return None
    LOG.info("instance %s unchanged (DMI product_uuid): using the cached %s datasource", ds.instance_id, ds.name)
    ds.reused()
    return ds


def find(state: BootState, stage: str, errors: list[str]) -> Datasource | None:
    """The first datasource of the configured list that provides an instance in ``stage``."""
    from cloudseed.agent.boot.detect import datasource_names
    from cloudseed.agent.datasources import find_datasource

    names, _source = datasource_names(state.system_cfg, state.cmdline)
    search = find_datasource(state.ds_context(stage), _possible(state, names))
    errors.extend(search.errors)
    return search.datasource


def _possible(state: BootState, names: list[str]) -> list[str]:
    """``names`` less the datasources the generator found cannot exist here."""
    enabled = load_json(state.root, state.paths.run("enabled"), _enabled_problem)
    if enabled is None or "datasources" not in enabled:  # the shell generator names none
        return names
    possible = {str(entry[0] if isinstance(entry, list) else entry).lower() for entry in enabled["datasources"]}
    return [n for n in names if n.lower() in possible or n.lower() == "none"]


def _enabled_problem(data: object) -> str | None:
    """Why ``data`` is not the generator's verdict (``/run/cloudseed/enabled``), or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__} where an object belongs"
    if not isinstance(data.get("datasources", []), list):
        return "its datasources are not a list"
    return None


def adopt(state: BootState, ds: Datasource) -> bool:
    """Record ``ds`` as this boot's datasource; True when its instance is new."""
    root, paths = state.root, state.paths
    iid = ds.instance_id
    previous = last_instance_id(state) or ""
    new_instance = previous != iid
    ensure_dirs(paths)
    idir = paths.instance_dir(iid)
    ensure_dir(root, idir, mode=0o755)  # a file where a state directory belongs is set aside, named
    ensure_dir(root, f"{idir}/scripts", mode=0o700)
    ensure_dir(root, f"{idir}/sem", mode=0o755)
    if new_instance:
        root.write(paths.previous_instance_file, (previous or "") + "\n")
        root.write(paths.current_instance_file, iid + "\n")
        LOG.info("new instance %s (previous: %s)", iid, previous or "none")
    if not _links_to(state, paths.instance_link, idir):
        if root.exists(paths.instance_link) and not root.islink(paths.instance_link):
            set_aside(root, paths.instance_link, "not a link to the instance's directory")
        root.symlink(idir, paths.instance_link)
    state.datasource = ds
    save_datasource(state, ds)
    state.record = {"instance_id": iid, "new_instance": new_instance or bool(state.record.get("new_instance")),
                    "datasource": ds.name}
    write_json(root, paths.run("boot.json"), state.record)
    return new_instance


def last_instance_id(state: BootState) -> str | None:
    """The instance this disk served last: ``data/instance-id``, checked.

    A damaged record (garbage, several lines, a directory) is set aside, and the ``instance`` link
    (which names that instance's directory) answers instead, so the same instance is not taken
    for a new one; None on a disk that never served one.
    """
    iid = load_line(state.root, state.paths.current_instance_file)
    if iid:
        return iid
    target = _readlink(state, state.paths.instance_link)
    prefix = state.paths.instances_dir + "/"
    if target and target.startswith(prefix) and "/" not in target[len(prefix):]:
        name = target[len(prefix):]
        if not name.startswith("%"):
            return name
        if not name.startswith("%sha256-"):
            from urllib.parse import unquote

            return unquote(name[1:])
    return None


def save_datasource(state: BootState, ds: Datasource) -> None:
    data = ds.to_json()
    write_json(state.root, state.paths.boot_datasource_file, data, mode=0o600)
    cached = f"{state.paths.instance_dir(ds.instance_id)}/datasource.json"
    if not _holds(state, cached, json_text(data).encode("utf-8"), 0o600):
        write_json(state.root, cached, data, mode=0o600)


def _holds(state: BootState, inner: str, content: bytes, mode: int) -> bool:
    """Is ``inner`` a regular file with exactly ``content`` and ``mode``?"""
    import os
    import stat

    try:
        info = os.lstat(state.root.path_nofollow(inner))
        return stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == mode and \
            state.root.read_bytes(inner) == content
    except OSError:
        return False


def _links_to(state: BootState, inner: str, target: str) -> bool:
    return _readlink(state, inner) == target


def _readlink(state: BootState, inner: str) -> str | None:
    import os

    try:
        return os.readlink(state.root.path_nofollow(inner))
    except OSError:
        return None


def load_datasource(state: BootState, last_instance: bool = True) -> Datasource | None:
    """The datasource found earlier this boot (or, failing that and when asked, the last instance's cache).

    A cache in a format this version does not read, or that does not parse, is logged and
    skipped (None: the caller searches again); it is never half-read.
    """
    from cloudseed.agent.datasources import datasource_class

    candidates = [state.paths.boot_datasource_file]
    if last_instance:
        candidates.append(f"{state.paths.instance_link}/datasource.json")
    for inner in candidates:
        data = load_json(state.root, inner, object_problem)  # garbage, a directory: set aside, named
        if data is None:
            continue
        problem = cache_problem(data)
        if problem is None:
            try:
                cls = datasource_class(data["name"])
            except (ImportError, AttributeError):
                problem = f"it names datasource {data['name']!r}, which this version does not have"
        if problem is None:
            try:
                return cls.from_json(state.ds_context(NETWORK), data)
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                problem = f"it does not parse ({type(e).__name__}: {e})"
        LOG.warning("datasource cache %s not used: %s; searching for the datasource again", inner, problem)
    return None


def cache_problem(data: object) -> str | None:
    """Why cache record ``data`` cannot be read by this version (None: it can)."""
    if not isinstance(data, dict):
        return f"it is a JSON {type(data).__name__}, not an object"
    version = data.get("format")
    if version not in CACHE_FORMATS:
        return (f"its format version is {version!r}; this version of cloudseed reads format "
                f"{', '.join(str(v) for v in CACHE_FORMATS)}")
    if not isinstance(data.get("name"), str) or not data["name"]:
        return "it names no datasource"
    return None
