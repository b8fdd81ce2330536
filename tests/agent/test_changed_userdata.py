"""User-data changed under the same instance-id: said in the status and the events, never silently kept.

cloud-init keeps running the old per-instance work and says nothing (its issues #6878, #5749,
#4359); cloudseed does not re-run it either (a new instance-id or ``clean`` does), but says so.
"""

from __future__ import annotations

import json
import os
import shutil

from cloudseed.agent.boot.stages import Agent
from tests.agent.webhook import Hook

SEED = "/var/lib/cloud/seed/nocloud"
MODULES = "network: {config: disabled}\ncloud_init_modules: []\ncloud_config_modules: [runcmd]\n" \
          "cloud_final_modules: [scripts_user]\n"


def boot(root, user: str, vendor: str = "", system: str = "") -> dict:
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES + system)
    root.write(f"{SEED}/meta-data", "instance-id: iid-same\n")
    root.write(f"{SEED}/user-data", user)
    root.write(f"{SEED}/vendor-data", vendor)
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    agent = Agent(root)
    agent.run_all()
    if agent.state.reporter is not None:
        agent.state.reporter.close()
    return json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]


def test_changed_user_data_is_said_until_it_is_back_or_cleaned(shell_target):
    root = shell_target
    hook = Hook()
    try:
        system = f"reporting: {{h: {{type: webhook, endpoint: '{hook.url}'}}}}\n"
        first = boot(root, "#cloud-config\nruncmd: ['echo one >> /var/tmp/log']\n", system=system)
        assert first["init"]["warnings"] == []
        second = boot(root, "#cloud-config\nruncmd: ['echo two >> /var/tmp/log']\n", system=system)
        advice = ("user-data changed since this instance was provisioned; per-instance modules were not re-run: "
                  "use `cloudseed clean --reboot` or a new instance-id")
        assert advice in second["init"]["warnings"]
        assert root.read_text("/var/tmp/log") == "one\n"  # not re-run, as cloud-init
        warned = [e for _, e in hook.received if e["name"] == "init-network" and e.get("result") == "WARN"]
        assert warned and advice in warned[-1]["description"]
        vendor = boot(root, "#cloud-config\nruncmd: ['echo one >> /var/tmp/log']\n", vendor="#cloud-config\n{}\n",
                      system=system)
        assert [w for w in vendor["init"]["warnings"] if "changed since" in w] == [
            advice.replace("user-data", "vendor-data", 1)]
        back = boot(root, "#cloud-config\nruncmd: ['echo one >> /var/tmp/log']\n", system=system)
        assert not any("changed since" in w for w in back["init"]["warnings"])
    finally:
        hook.close()
