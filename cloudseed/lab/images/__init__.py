"""The lab's disk images: ``rootfs`` (the cached Debian tree), ``agent_install`` (an agent and the
lab's guest helper put into a tree), ``image`` (the raw disk, kernel and initrd, cached by what
went in), ``readback`` (files read back from a guest disk without booting it)."""
