"""dnf (or yum where that is what the image has), the RHEL family's package manager.

``dnf -y makecache`` refreshes the index, ``dnf -y upgrade`` upgrades, ``dnf -y install NAME``
installs (a pinned package is ``name-version``). Without dnf, ``yum -t -y`` (``-t``: an already
installed package is not an error). A reboot is required when ``needs-restarting -r`` (dnf-utils)
exits 1; without that tool the question cannot be answered and the answer is no.
"""

from __future__ import annotations

from cloudseed.agent.package_managers.base import LOG, PackageError, PackageManager
from cloudseed.core.root import CommandError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence


class DnfManager(PackageManager):
    name = "dnf"
    tool = "dnf"
    transient_markers = ("Curl error", "Cannot download", "Failed to download metadata", "timed out",
                         "Could not resolve host")

    def command(self, verb: str, packages: Sequence[str] = ()) -> list[str]:
        if self.root.which("dnf") is None and self.root.which("yum") is not None:
            self.tool = "yum"
            return ["yum", "-t", "-y", verb, *packages]
        self.tool = "dnf"
        return ["dnf", "-y", verb, *packages]

    def available(self) -> bool:
        return self.root.which("dnf") is not None or self.root.which("yum") is not None

    def refresh_index(self) -> None:
        self.run(self.command("makecache"), "makecache")

    def upgrade(self) -> None:
        self.run(self.command("upgrade"), "upgrade")

    def install(self, packages: Sequence[tuple[str, str | None]]) -> None:
        self.run(self.command("install", [f"{name}-{version}" if version else name for name, version in packages]),
                 "install")

    def reboot_required(self) -> bool:
        if self.root.which("needs-restarting") is None:
            LOG.warning("dnf: needs-restarting (dnf-utils) is not installed; cannot tell whether a reboot "
                        "is required")
            return False
        try:
            proc = self.root.run(["needs-restarting", "-r"], check=False, timeout=120)
        except CommandError as e:
            raise PackageError(f"needs-restarting -r failed: {e}") from None
        return proc.returncode == 1


MANAGER = DnfManager
