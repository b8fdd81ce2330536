"""reset_rmc: a new RSCT node id where IBM's RSCT is installed; nothing (said in the log) elsewhere.

RSCT is IBM's, for PowerVM, and not in Debian's archive: recording scripts stand in for
``rmcctrl`` and ``recfgct`` (recfgct writes a new node id as the real one does) in a temporary
root with a chrooted busybox shell.
"""

from __future__ import annotations

import logging

from tests.agent.modules.module_support import InputDatasource, run

RSCT = "/opt/rsct/install/bin"


def _rsct(root, recfgct_body: str = "echo 'new-node-id' > /etc/ct_node_id\n") -> None:
    root.makedirs("/var/log")
    root.write("/etc/ct_node_id", "old-node-id\n")
    root.makedirs(RSCT)
    root.write(f"{RSCT}/rmcctrl", '#!/bin/sh\necho "rmcctrl $*" >> /var/log/calls.log\n', mode=0o755)
    root.write(f"{RSCT}/recfgct", f'#!/bin/sh\necho "recfgct $*" >> /var/log/calls.log\n{recfgct_body}', mode=0o755)


def test_node_id_reset(shell_target):
    _rsct(shell_target)
    result, _ = run(shell_target, "reset_rmc", {}, datasource=InputDatasource(name="ConfigDrive"), stage="final")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/var/log/calls.log") == "rmcctrl -z\nrecfgct \n"
    assert shell_target.read_text("/etc/ct_node_id") == "new-node-id\n"


def test_unchanged_node_id_is_a_failure(shell_target):
    _rsct(shell_target, recfgct_body="")
    result, _ = run(shell_target, "reset_rmc", {}, datasource=InputDatasource(name="ConfigDrive"), stage="final")
    assert result.status == "failed" and "node id in /etc/ct_node_id did not change" in result.reason


def test_failing_rmcctrl(shell_target):
    _rsct(shell_target)
    shell_target.write(f"{RSCT}/rmcctrl", "#!/bin/sh\necho 'rmcctrl: subsystem busy' >&2\nexit 3\n", mode=0o755)
    result, _ = run(shell_target, "reset_rmc", {}, datasource=InputDatasource(name="ConfigDrive"), stage="final")
    assert result.status == "failed" and "stopping the RMC subsystem" in result.reason
    assert shell_target.read_text("/etc/ct_node_id") == "old-node-id\n"


def test_without_rsct_nothing_happens_and_the_log_says_why(target, caplog):
    with caplog.at_level(logging.INFO):
        result, _ = run(target, "reset_rmc", {}, datasource=InputDatasource(name="ConfigDrive"), stage="final")
    assert result.status == "ok", result.reason
    assert "RSCT is not installed" in caplog.text


def test_without_a_datasource_nothing_happens(shell_target, caplog):
    _rsct(shell_target)
    with caplog.at_level(logging.INFO):
        result, _ = run(shell_target, "reset_rmc", {}, datasource=InputDatasource(name="None"), stage="final")
    assert result.status == "ok"
    assert not shell_target.exists("/var/log/calls.log") and "no datasource found" in caplog.text
