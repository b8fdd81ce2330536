"""The guest helper's modules (``cloudseed/lab/guest/``), importable by the lab tests.

They are not a package of cloudseed (the guest runs them as plain scripts with its own python3),
so the tests load them from their directory, as the guest does.
"""

from __future__ import annotations

import os
import sys

GUEST = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "cloudseed", "lab", "guest")
if GUEST not in sys.path:
    sys.path.insert(0, GUEST)  # plain scripts, not a package: loaded from their directory as the guest does

import labguest  # noqa: E402
import labnet  # noqa: E402
import labstate  # noqa: E402

__all__ = ["labguest", "labnet", "labstate"]
