"""snap, for ``packages: {snap: [...]}``: ``snap install NAME`` (a version is a channel).

There is no index to refresh; an upgrade is ``snap refresh``. The snap module (assertions and
commands) runs its own commands; this plugin only installs and refreshes packages.
"""

from __future__ import annotations

from cloudseed.agent.package_managers.base import PackageManager

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence


class SnapManager(PackageManager):
    name = "snap"
    tool = "snap"
    transient_markers = ("timeout", "temporary failure", "cannot communicate with server")

    def refresh_index(self) -> None:
        """Snaps have no local index."""

    def upgrade(self) -> None:
        self.run(["snap", "refresh"], "refresh")

    def install(self, packages: Sequence[tuple[str, str | None]]) -> None:
        for name, channel in packages:  # one at a time: a channel applies to one snap
            self.run(["snap", "install", name, *([f"--channel={channel}"] if channel else [])], f"install {name}")


MANAGER = SnapManager
