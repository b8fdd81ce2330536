"""The one error type of the seed builder: bad input or a limit exceeded, said plainly."""

from __future__ import annotations


class SeedError(Exception):
    """A seed could not be built; the message names the problem and where it is."""
