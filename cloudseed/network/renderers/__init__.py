"""Network renderers: one module per output format, found by file name.

A renderer module declares ``NAME`` (the name users give: ``network-manager`` lives in
``network_manager.py``), ``DESCRIPTION``, ``OWNED`` (glob patterns of the files it may have
written before, for cleaning up stale ones), ``available(root) -> bool`` (does the target system
use this format) and ``render(model, distro) -> list[RenderedFile]``, which reads only the model
and raises ``NetworkConfigError`` for anything the format cannot express (optionally
``context(root) -> dict``: facts of the target system ``render`` takes as keywords).

Adding a renderer is adding a file here; nothing else needs to change. Which renderer a system
gets is the distro's declaration (the agent's distro files declare ``renderers``, an order); the
agent passes it in, since this layer may not import the agent. The contract is in ``_contract.py``.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from cloudseed.network.errors import NetworkConfigError


class NoRendererError(NetworkConfigError):
    """No renderer in the priority list is available on the target system."""


def names() -> list[str]:
    """Every renderer name, from the files in this package."""
    here = os.path.dirname(__file__)
    out = []
    for fn in sorted(os.listdir(here)):
        if fn.endswith(".py") and not fn.startswith("_"):
            out.append(fn[:-3].replace("_", "-"))
    return out


def get_renderer(name: str) -> ModuleType:
    if name not in names():
        raise NetworkConfigError(f"unknown renderer {name!r} (known: {', '.join(names())})")
    return importlib.import_module(f"{__name__}.{name.replace('-', '_')}")


def priority_for(distro: object) -> list[str]:
    """The distro's declared order (``distro.renderers``, when the caller's distro carries one),
    then every other renderer by name."""
    order = [str(n) for n in getattr(distro, "renderers", None) or ()]
    return order + [n for n in names() if n not in order]


def select(root, distro: object = "debian", priority: list | None = None) -> str:
    """The first renderer of ``priority`` (default: the distro's declared order) the root has."""
    order = list(priority) if priority else priority_for(distro)
    for name in order:
        if get_renderer(name).available(root):
            return name
    raise NoRendererError(f"no network renderer available in {getattr(root, 'top', root)} "
                          f"(searched {', '.join(order)})")
