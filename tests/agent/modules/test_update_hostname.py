"""update_hostname: follows the config at every boot until the administrator changes the name.
"""

from __future__ import annotations

from tests.agent.modules.module_support import run


def test_update_hostname_follows_config_until_admin_changes_it(target):
    run(target, "set_hostname", {"hostname": "first"})
    result, _ = run(target, "update_hostname", {"hostname": "second"})
    assert result.status == "ok"
    assert target.read_text("/etc/hostname") == "second\n"
    target.write("/etc/hostname", "admins-choice\n")
    run(target, "update_hostname", {"hostname": "third"})
    assert target.read_text("/etc/hostname") == "admins-choice\n"
