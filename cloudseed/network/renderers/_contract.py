"""The contract of a network renderer file (``cloudseed/network/renderers/<name>.py``), for tests and tools.

Never imported at run time (it imports typing). ``RendererPlugin`` is what the file declares:
the name users give (the file name with ``-`` for ``_``), a description, the files it may have
written (glob patterns, for cleaning up stale ones), whether a target system uses its format,
and ``render``, which reads only the network model (and, where a renderer declares ``context``,
the few facts of the target system that function read).
"""

from __future__ import annotations

from types import ModuleType
from typing import List, Protocol, Union

from cloudseed.network.model import NetworkModel


class RendererPlugin(Protocol):
    """What a renderer file declares."""

    NAME: str
    DESCRIPTION: str
    OWNED: Union[List[str], tuple[str, ...]]

    def available(self, root: object) -> bool: ...

    def render(self, model: NetworkModel, distro: str = "debian") -> list: ...

# Optional: ``context(root) -> dict``, what of the target system the output depends on (eni: whether
# the system's own file brings up ``lo``), passed to ``render`` as keywords by ``network.apply``.


# what tests/architecture/protocol_check.py checks first: (the part of the file, its Protocol)
PROTOCOLS = ((None, RendererPlugin),)


def problems(plugin: ModuleType, stem: str) -> list[str]:
    """Every way the renderer file ``stem``.py breaks its contract."""
    found: list[str] = []
    if stem.replace("_", "-") != plugin.NAME:
        found.append(f"NAME is {plugin.NAME!r}, the file is {stem}.py (NAME {stem.replace('_', '-')!r})")
    if not plugin.DESCRIPTION.strip():
        found.append("DESCRIPTION is empty")
    if not plugin.OWNED or any(not str(p).startswith("/") for p in plugin.OWNED):
        found.append(f"OWNED {plugin.OWNED!r}: absolute glob patterns of the files it writes")
    return found
