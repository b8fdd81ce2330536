"""The guest agent, arranged by job.

``boot/`` runs the stages (the boot engine), ``state/`` keeps and reports what they did,
``config/`` reads the configuration and checks cloud-config against the modules' schema; the
plugin folders ``datasources/``, ``modules/`` and ``distros/`` hold one file each; ``userdata/``
reads user-data formats, ``seedfs/`` seed images, ``reporting/`` sends events. The files at this
level are helpers that several modules or datasources share (users, SSH keys, host keys, disks,
devices, scripts, the temporary network, signed user-data, ``cloudseed plan``).
"""
