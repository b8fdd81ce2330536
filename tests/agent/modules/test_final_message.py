"""final_message: the message (with its variables filled in) on the console, and boot-finished written."""

from __future__ import annotations

from cloudseed import __version__
from tests.agent.modules.module_support import InputDatasource, run


def test_variables_are_filled_in_and_boot_finished_is_written(target, capsys):
    cfg = {"final_message": "up $UPTIME s, ds ${DATASOURCE}, v{{ version }}, at $TIMESTAMP, $UNKNOWN kept"}
    result, ctx = run(target, "final_message", cfg, datasource=InputDatasource(name="NoCloud"), stage="final")
    assert result.status == "ok", result.reason
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("up ") and f", ds NoCloud, v{__version__}, at " in line and line.endswith("$UNKNOWN kept")
    assert "$UPTIME" not in line and "$TIMESTAMP" not in line
    finished = target.read_text(f"{ctx.instance_dir}/boot-finished")
    assert finished.endswith(f" - v. {__version__}\n") and finished.count(" - ") == 2


def test_default_message_without_a_datasource(target, capsys):
    result, _ = run(target, "final_message", {}, stage="final")
    assert result.status == "ok", result.reason
    err = capsys.readouterr().err
    assert "cloudseed: finished at " in err and ", datasource none, up " in err
