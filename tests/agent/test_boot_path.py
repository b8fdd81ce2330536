"""Small boot-path promises of issue 18: install's --root after the verb, /etc/hostname's mode."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from cloudseed.agent.stages import Agent

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_install_accepts_root_after_the_verb(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "install", "--root", str(tmp_path), "--no-compile"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "usr/lib/systemd/system/cloudseed-local.service").exists()
    assert os.access(tmp_path / "usr/lib/systemd/system-generators/cloudseed-generator", os.X_OK)


def test_hostname_file_is_written_0644_whatever_the_image_had(target):
    root = target
    root.write("/etc/hostname", "image\n", mode=0o755)  # as the lab image ships it
    root.write("/etc/cloudseed/cloud.cfg.d/00.cfg", "network: {config: disabled}\ncloud_init_modules: [set_hostname]\n"
               "cloud_config_modules: []\ncloud_final_modules: []\n")
    root.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-host\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\nhostname: named\n")
    assert Agent(root).run_all() == 0
    assert root.read_text("/etc/hostname") == "named\n"
    assert stat.S_IMODE(root.stat("/etc/hostname").st_mode) == 0o644
