"""``cloudseed features``: the feature names cloud-init's ``features`` verb lists, that hold here.

Scripts ask ``cloud-init features`` before relying on a capability; cloudseed answers with the
names of the ones it has (network config version 1 and version 2), one a line, sorted.
"""

from __future__ import annotations

import argparse

HELP = "list the cloud-init feature names this agent supports (as cloud-init features)"

FEATURES = ("NETWORK_CONFIG_V1", "NETWORK_CONFIG_V2")


def configure(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    print("\n".join(sorted(FEATURES)))
    return 0
