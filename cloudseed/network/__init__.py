"""One network model, its parsers (v1, v2, OpenStack network_data.json) and its renderers.

This package is imported on the boot path, so this file stays tiny: the parsers, the model and
the renderers are imported only when used.

- ``parse(data, kind="auto", macs=None)`` reads network config v1, v2 (netplan subset) or an
  OpenStack ``network_data.json`` dict into a ``NetworkModel`` (``cloudseed.network.model``).
- ``to_network_data(model)`` writes a model back as OpenStack ``network_data.json``.
- ``render(model, renderer, distro="debian")`` gives the files a renderer would write.
- ``cloudseed.network.apply.apply_network`` is the whole local-stage job.
"""

from __future__ import annotations

__all__ = ["NetworkConfigError", "parse", "render", "to_network_data"]


def __getattr__(name: str) -> object:
    """``NetworkConfigError`` (defined in ``errors``, which the parsers and renderers import) is
    loaded when first asked for, so importing this package still imports nothing."""
    if name == "NetworkConfigError":
        from cloudseed.network.errors import NetworkConfigError

        return NetworkConfigError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse(data: dict, kind: str = "auto", macs: dict[str, str] | None = None) -> object:
    """Parse a v1, v2 or OpenStack network config dict into a ``NetworkModel``.

    ``kind`` is ``auto``, ``v1``, ``v2`` or ``openstack``. ``macs`` maps lowercase MAC
    addresses to interface names; without it, names are looked up in ``/sys/class/net`` when a
    MAC must be resolved.
    """
    from cloudseed.network.parsers import parse as _parse

    return _parse(data, kind=kind, macs=macs)


def to_network_data(model: object) -> dict:
    """The model as an OpenStack ``network_data.json`` dict (NetworkConfigError if it cannot be)."""
    from cloudseed.network.openstack import to_network_data as _to

    return _to(model)


def render(model: object, renderer: str, distro: str = "debian") -> list:
    """The files ``renderer`` writes for ``model``: a list of ``RenderedFile`` (path, content, mode)."""
    from cloudseed.network.renderers import get_renderer

    return get_renderer(renderer).render(model, distro=distro)
