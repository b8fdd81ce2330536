"""The seed builder: NoCloud seeds (``cidata``) and OpenStack config drives (``config-2``).

``content`` turns an instance description into the files of a seed, ``iso9660`` and ``vfat``
write those files as a filesystem image, deterministically (same input, same bytes).
``build.build_seed`` ties them together; ``cloudseed seed build`` is its command line.
"""
