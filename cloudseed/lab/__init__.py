"""The lab: build a small Debian image, boot it under qemu with a seed, report what the agent did."""
