"""Where the agent keeps its state, and the small records it keeps there.

Persistent state lives in ``/var/lib/cloudseed`` (per-instance directories, semaphores, the
previous instance id, scripts); per-boot state in ``/run/cloudseed`` (status, results, instance
data, the datasource found this boot). Everything is plain JSON so it survives upgrades.

The package holds the state and what reports it: ``files`` (state files read with their shape
checked), ``status`` (``status.json``, ``result.json``), ``instance_data_json``
(``instance-data.json`` and ``cloudseed query``), ``log`` and ``output`` (the log and where a
stage's output goes), ``compat_paths`` (cloud-init's paths as links to these files).
"""

from __future__ import annotations

import json
import re
import time

from cloudseed.core.root import RootError, TargetRoot

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

DATA_DIR = "/var/lib/cloudseed"
RUN_DIR = "/run/cloudseed"
LOG_FILE = "/var/log/cloudseed.log"

PER_INSTANCE = "per-instance"
PER_BOOT = "per-boot"  # also spelled "always"
PER_ONCE = "per-once"
FREQUENCIES = (PER_INSTANCE, PER_BOOT, PER_ONCE)
_FREQUENCY_ALIASES = {"always": PER_BOOT, "once": PER_ONCE, "instance": PER_INSTANCE,
                      "once-per-instance": PER_INSTANCE, "boot": PER_BOOT}

# Directories of scripts users drop into an image; cloud-init's are honoured too.
SCRIPT_DIRS = {
    PER_BOOT: (f"{DATA_DIR}/scripts/per-boot", "/var/lib/cloud/scripts/per-boot"),
    PER_INSTANCE: (f"{DATA_DIR}/scripts/per-instance", "/var/lib/cloud/scripts/per-instance"),
    PER_ONCE: (f"{DATA_DIR}/scripts/per-once", "/var/lib/cloud/scripts/per-once"),
}


def normalize_frequency(value: str) -> str:
    """Canonical frequency name; raises ValueError naming the accepted spellings."""
    text = str(value).strip().lower()
    text = _FREQUENCY_ALIASES.get(text, text)
    if text not in FREQUENCIES:
        raise ValueError(f"unknown frequency {value!r} (use per-instance, per-boot/always or per-once)")
    return text


_PLAIN_ID = re.compile(r"^[A-Za-z0-9_:-][A-Za-z0-9_.:-]{0,200}$")


def safe_instance_id(instance_id: str) -> str:
    """The directory name of an instance id: the id itself when it is a plain name, else escaped.

    Plain ids (letters, digits, ``_.:-``, not starting with a dot) are used as they are, as
    cloud-init does. Any other id is percent-escaped behind a ``%`` that no plain id contains, so
    two different ids never share a directory (``a/b`` and ``a_b``, ``.x`` and ``_x`` did).
    """
    if _PLAIN_ID.match(instance_id):
        return instance_id
    from urllib.parse import quote

    escaped = quote(instance_id, safe="")
    if len(escaped) > 200:   # a directory name has at most 255 bytes: a long id is named by its digest
        import hashlib

        return "%sha256-" + hashlib.sha256(instance_id.encode("utf-8", "surrogatepass")).hexdigest()
    return "%" + ("%2E" + escaped[1:] if escaped.startswith(".") else escaped)


class Paths:
    """Named locations of agent state inside a target root."""

    def __init__(self, root: TargetRoot, data_dir: str = DATA_DIR, run_dir: str = RUN_DIR):
        self.root = root
        self.data_dir = data_dir
        self.run_dir = run_dir

    # persistent
    @property
    def instances_dir(self) -> str:
        return f"{self.data_dir}/instances"

    @property
    def instance_link(self) -> str:
        return f"{self.data_dir}/instance"

    def instance_dir(self, instance_id: str) -> str:
        return f"{self.instances_dir}/{safe_instance_id(instance_id)}"

    @property
    def previous_instance_file(self) -> str:
        return f"{self.data_dir}/data/previous-instance-id"

    @property
    def current_instance_file(self) -> str:
        return f"{self.data_dir}/data/instance-id"

    @property
    def once_sem_dir(self) -> str:
        return f"{self.data_dir}/sem"

    # per boot
    def run(self, name: str) -> str:
        return f"{self.run_dir}/{name}"

    @property
    def status_file(self) -> str:
        return self.run("status.json")

    @property
    def result_file(self) -> str:
        return self.run("result.json")

    @property
    def instance_data_file(self) -> str:
        return self.run("instance-data.json")

    @property
    def instance_data_sensitive_file(self) -> str:
        return self.run("instance-data-sensitive.json")

    @property
    def boot_datasource_file(self) -> str:
        """The datasource found this boot (0600: it holds user-data)."""
        return self.run("datasource.json")

    @property
    def combined_config_file(self) -> str:
        """System config merged with vendor and user cloud-config for this boot (0600)."""
        return self.run("combined-cloud-config.json")

    @property
    def disabled_marker(self) -> str:
        return "/etc/cloudseed/disabled"


def read_json(root: TargetRoot, inner: str) -> Any:
    """Parsed JSON at ``inner``, or None when it is missing or unreadable."""
    try:
        return json.loads(root.read_bytes(inner))
    except (OSError, ValueError):
        return None


def json_text(data: Any, sort_keys: bool = True) -> str:
    """``data`` as ``write_json`` writes it: any value YAML can give (``json_ready``)."""
    return json.dumps(json_ready(data), indent=1, sort_keys=sort_keys) + "\n"


def write_json(root: TargetRoot, inner: str, data: Any, mode: int = 0o644) -> None:
    """Write a state file; a directory standing where it belongs is set aside (``state_files``) first."""
    text = json_text(data)
    try:
        root.write(inner, text, mode=mode)
    except RootError:
        from cloudseed.agent.state.files import clear_for_file

        if not clear_for_file(root, inner):
            raise
        root.write(inner, text, mode=mode)


def json_ready(value: Any) -> Any:
    """``value`` with everything JSON cannot hold made into something it can.

    User-data's YAML can hold what JSON cannot: ``!!binary`` (bytes, written ``ci-b64:<base64>`` as
    cloud-init writes them in instance data), dates and times (ISO 8601 text), ``!!set`` (a list),
    and keys that are not strings (integers, dates, booleans, null: their text, as JSON writes an
    integer key). Sorting keys of mixed types (``{1: a, b: c}``) then works too.
    """
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {_json_key(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [json_ready(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=repr)
    if isinstance(value, (bytes, bytearray)):
        import base64

        return "ci-b64:" + base64.b64encode(bytes(value)).decode("ascii")
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return isoformat()
    return str(value)


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return json.dumps(key)          # true, false, null: as JSON writes such a key
    ready = json_ready(key)
    return ready if isinstance(ready, str) else str(ready)


class Semaphores:
    """Records that a module or script ran, per instance or once ever."""

    def __init__(self, paths: Paths, instance_id: str | None):
        self.paths = paths
        self.instance_id = instance_id

    def _marker(self, name: str, frequency: str) -> str | None:
        if frequency == PER_ONCE:
            return f"{self.paths.once_sem_dir}/{name}.once"
        if frequency == PER_INSTANCE and self.instance_id:
            return f"{self.paths.instance_dir(self.instance_id)}/sem/{name}"
        return None

    def has_run(self, name: str, frequency: str) -> bool:
        marker = self._marker(name, frequency)
        return marker is not None and self.paths.root.exists(marker)

    def mark(self, name: str, frequency: str) -> None:
        marker = self._marker(name, frequency)
        if marker is None:
            return
        try:
            self.paths.root.write(marker, f"{time.time():.3f}\n", mode=0o644)
        except RootError:  # the semaphore directory is damaged (a file in its place): set aside, made anew
            from cloudseed.agent.state.files import clear_for_file, ensure_dir

            parent = marker.rsplit("/", 1)[0]
            ensure_dir(self.paths.root, parent)
            clear_for_file(self.paths.root, marker)
            self.paths.root.write(marker, f"{time.time():.3f}\n", mode=0o644)

    def parts(self, name: str, frequency: str) -> PartsDone:
        """The record of the parts of a module's work done so far (``ModuleContext.done_before``)."""
        marker = self._marker(name, frequency)
        return PartsDone(self.paths.root, f"{marker}.parts" if marker else self.paths.run(f"parts/{name}"))

    def clear(self, name: str, frequency: str) -> None:
        marker = self._marker(name, frequency)
        if marker is not None:
            self.paths.root.remove(marker)


class PartsDone:
    """The parts of a module's work that runs which did not finish it have done (entries, scripts).

    One empty file per part, named by a digest of it (the directory is 0700), kept until the module
    succeeds. The directory is listed once per run; a module that never asks costs nothing.
    """

    def __init__(self, root: TargetRoot, directory: str):
        self.root = root
        self.directory = directory
        self.touched = False
        self._names: set[str] | None = None

    def _known(self) -> set[str]:
        if self._names is None:
            import os

            try:
                self._names = set(os.listdir(self.root.path(self.directory)))
            except OSError:
                self._names = set()
        return self._names

    def done(self, part: str) -> bool:
        self.touched = True
        return _part_name(part) in self._known()

    def record(self, part: str, durable: bool) -> None:
        """Record ``part`` (OSError when it cannot be). ``durable``: on disk before returning (fsync'd),
        for a part whose repeat would do harm (an append); else its creation alone (a kill keeps it)."""
        import os

        self.touched = True
        name = _part_name(part)
        inner = f"{self.directory}/{name}"
        self.root.makedirs(self.directory, mode=0o700)  # names are digests of the entries: private
        if durable:
            self.root.write(inner, b"", mode=0o600)
        else:
            os.close(os.open(self.root.path_nofollow(inner), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o600))
        self._known().add(name)

    def forget(self, part: str) -> None:
        name = _part_name(part)
        self.root.remove(f"{self.directory}/{name}")
        self._known().discard(name)

    def clear(self) -> None:
        """The module succeeded: the record goes (never raises; one left behind goes at the next success)."""
        if not self.touched:
            return
        try:
            self.root.remove_tree(self.directory)
        except (OSError, RootError):
            pass


def _part_name(part: str) -> str:
    import hashlib

    return hashlib.sha256(part.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def uptime_seconds() -> float | None:
    """Seconds since the running kernel booted (None where /proc is not there)."""
    try:
        with open("/proc/uptime") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"


def ensure_dirs(paths: Paths) -> None:
    """Create the state directories with private modes (user-data lives below them)."""
    from cloudseed.agent.state.files import ensure_dir

    root = paths.root
    for inner in (paths.data_dir, paths.instances_dir, f"{paths.data_dir}/data", paths.once_sem_dir,
                  f"{paths.data_dir}/scripts",
                  *(freq_dirs[0] for freq_dirs in SCRIPT_DIRS.values()), paths.run_dir):
        ensure_dir(root, inner, mode=0o755)  # a file where one belongs is set aside, named in the status
