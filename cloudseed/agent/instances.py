"""Finding and adopting a datasource's instance, and the datasource cache later stages and boots read.

Finding tries the configured ``datasource_list`` (``ci.ds=`` on the command line wins) less the
datasources the generator found cannot exist here.

Adopting records the instance this boot serves: its directory under
``/var/lib/cloudseed/instances``, the ``instance`` link, the current and previous instance ids,
and ``/run/cloudseed/boot.json``. The datasource found is cached (0600: it holds user-data) for
this boot in ``/run/cloudseed/datasource.json`` and for the instance in its directory.
"""

from __future__ import annotations

import logging

from cloudseed.agent.datasources import NETWORK
from cloudseed.agent.state import ensure_dirs, read_json, write_json

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from cloudseed.agent.boot_state import BootState
    from cloudseed.agent.datasources import Datasource

LOG = logging.getLogger("cloudseed.instances")


def find(state: BootState, stage: str, errors: list[str]) -> Datasource | None:
    """The first datasource of the configured list that provides an instance in ``stage``."""
    from cloudseed.agent.datasources import find_datasource
    from cloudseed.agent.detect import datasource_names

    names, _source = datasource_names(state.system_cfg, state.cmdline)
    search = find_datasource(state.ds_context(stage), _possible(state, names))
    errors.extend(search.errors)
    return search.datasource


def _possible(state: BootState, names: list[str]) -> list[str]:
    """``names`` less the datasources the generator found cannot exist here."""
    enabled = read_json(state.root, state.paths.run("enabled"))
    if not isinstance(enabled, dict) or not isinstance(enabled.get("datasources"), list):
        return names
    possible = {str(entry[0] if isinstance(entry, list) else entry).lower() for entry in enabled["datasources"]}
    return [n for n in names if n.lower() in possible or n.lower() == "none"]


def adopt(state: BootState, ds: Datasource) -> bool:
    """Record ``ds`` as this boot's datasource; True when its instance is new."""
    root, paths = state.root, state.paths
    iid = ds.instance_id
    previous = root.read_text(paths.current_instance_file, default="").strip()
    new_instance = previous != iid
    ensure_dirs(paths)
    idir = paths.instance_dir(iid)
    root.makedirs(idir, mode=0o755)
    root.makedirs(f"{idir}/scripts", mode=0o700)
    root.makedirs(f"{idir}/sem", mode=0o755)
    if new_instance:
        root.write(paths.previous_instance_file, (previous or "") + "\n")
        root.write(paths.current_instance_file, iid + "\n")
        LOG.info("new instance %s (previous: %s)", iid, previous or "none")
    root.symlink(idir, paths.instance_link)
    state.datasource = ds
    save_datasource(state, ds)
    state.record = {"instance_id": iid, "new_instance": new_instance or bool(state.record.get("new_instance")),
                    "datasource": ds.name}
    write_json(root, paths.run("boot.json"), state.record)
    return new_instance


def save_datasource(state: BootState, ds: Datasource) -> None:
    data = ds.to_json()
    write_json(state.root, state.paths.boot_datasource_file, data, mode=0o600)
    write_json(state.root, f"{state.paths.instance_dir(ds.instance_id)}/datasource.json", data, mode=0o600)


def load_datasource(state: BootState) -> Datasource | None:
    """The datasource found earlier this boot (or, failing that, the last instance's cache)."""
    from cloudseed.agent.datasources import datasource_class

    for inner in (state.paths.boot_datasource_file, f"{state.paths.instance_link}/datasource.json"):
        data = read_json(state.root, inner)
        if isinstance(data, dict) and data.get("name"):
            try:
                cls = datasource_class(data["name"])
            except (ImportError, AttributeError):
                continue
            return cls.from_json(state.ds_context(NETWORK), data)
    return None
