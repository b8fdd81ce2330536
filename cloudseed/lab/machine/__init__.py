"""One lab VM under qemu: ``vm`` (the machine, its overlay and forwarded ports), ``console`` (the
serial console and the markers on it), ``qmp`` (qemu's control protocol), ``channel`` (the
virtio-serial ports to the guest helper), ``accel`` (KVM or TCG), ``snapshot`` (a VM saved just
before the agent reads its seed, restored for each try)."""
