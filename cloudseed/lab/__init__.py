"""The lab: build a small Debian image, boot it under qemu with a seed, report what the agent did.

By job: ``images/`` (the cached Debian tree, an agent put into it, the disk, reading a disk back),
``machine/`` (one qemu VM: its console, QMP, virtio-serial channels, the accelerator, snapshots),
``boots/`` (one boot, tries from a snapshot, --repeat, --parallel, --compare, and how the
instance data reaches the guest: seeds or a metadata server), ``reports/`` (what the agent said,
the report, timeline, checks, state differences, HTML and JUnit), ``cache.py`` (where built things
are kept, shared by images and machine) and ``guest/`` (the helper that runs inside the guest).
See docs/lab.md.
"""
