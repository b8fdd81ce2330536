"""The final stage's reading, done while its unit waits for ``multi-user.target`` (issue 30).

On a reboot the final message (the boot's "finished") came 0.15-0.2 s after ``multi-user.target``
under TCG, of which 4-22 ms was the stage reading what it runs with: this boot's merged
configuration and the instance data, JSON files parsed (docs/lab.md). The boot's one process
has nothing to do between the config stage and the final unit's start (sshd, logins and the other
services of ``multi-user.target`` start meanwhile), so ``stages.run_stages`` reads them then, at the
config stage's niceness 10. Reading is all: no module runs, nothing is written, no damaged file is
set aside (a file that is not as expected leaves the reading to the stage). When the unit asks,
the stage uses what was read only if the files are still the very ones read (same inode, size,
modification and change times) and the datasource is the same; otherwise it reads them as before.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

    from cloudseed.agent.boot.boot_state import BootState


class PreparedStage:
    """A module stage's merged configuration and instance data, and the files they came from."""

    def __init__(self, cfg: dict, data: dict, datasource: Any, signature: tuple):
        self.cfg, self.data, self.datasource, self.signature = cfg, data, datasource, signature

    def holds(self, state: BootState) -> bool:
        """Still what the stage would read now?"""
        return state.datasource is self.datasource and _signature(state) == self.signature


def _files(state: BootState) -> tuple[str, str, str]:
    paths = state.paths
    return paths.combined_config_file, paths.instance_data_sensitive_file, paths.instance_data_file


def _signature(state: BootState) -> tuple | None:
    """Which files these are: None when one is missing or not a regular file."""
    marks = []
    for inner in _files(state):
        try:
            info = os.stat(state.root.path(inner))
        except (OSError, ValueError):
            return None
        if (info.st_mode & 0o170000) != 0o100000:
            return None
        marks.append((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    return tuple(marks)


def _object(state: BootState, inner: str) -> dict | None:
    try:
        data = json.loads(state.root.read_bytes(inner))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def prepare(state: BootState) -> PreparedStage | None:
    """Read what the final stage will run with; None when the stage must read it itself (no
    datasource of this boot's, a file missing or not as the stage expects, a file changing while
    read). Never raises: preparing only saves time."""
    from cloudseed.agent.state.instance_data_json import describes

    try:
        ds = state.datasource
        if ds is None or state.record.get("instance_id") not in (None, ds.instance_id):
            return None  # the stage loads the recorded datasource itself (``_datasource_for_modules``)
        signature = _signature(state)
        if signature is None:
            return None
        combined, sensitive, public = (_object(state, inner) for inner in _files(state))
        if combined is None or sensitive is None or public is None:
            return None
        if not (isinstance(sensitive.get("v1"), dict) and isinstance(public.get("v1"), dict)
                and describes(sensitive, ds)):
            return None  # the stage repairs or rebuilds them (``_stage_instance_data``)
        if _signature(state) != signature:
            return None
        return PreparedStage(state.with_files(combined), sensitive, ds, signature)
    except Exception as e:  # noqa: BLE001 - the stage reads for itself
        import logging

        logging.getLogger("cloudseed.stages").debug("the final stage's files not read ahead: %s", e)
        return None
