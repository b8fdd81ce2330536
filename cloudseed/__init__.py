"""cloudseed: cloud instance initialisation, both sides (guest agent and provider), plus a VM lab."""

__version__ = "0.1.0"
