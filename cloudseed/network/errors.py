"""The network layer's one error, in a file of its own so the parsers, the model and the renderers
can raise it without importing the package's entry points (``cloudseed.network``), which import them.
"""

from __future__ import annotations


class NetworkConfigError(Exception):
    """Invalid or unrenderable network configuration; the message names the key path."""
