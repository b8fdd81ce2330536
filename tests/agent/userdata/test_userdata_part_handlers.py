"""Running recorded part-handlers later, as the network stage does."""

from __future__ import annotations

import json

from cloudseed.agent.userdata import process_userdata
from cloudseed.agent.userdata.part_handlers import run_part_handlers

HANDLER = """#part-handler
import json
handler_version = {version}
def list_types():
    return ["text/x-custom"]
def handle_part(data, ctype, filename, payload, *rest):
    with open({log!r}, "a") as f:
        f.write(json.dumps([ctype, filename, payload, len(rest)]) + "\\n")
"""


def blob(log: str, version: int = 2) -> bytes:
    return (f'Content-Type: multipart/mixed; boundary="B"\nMIME-Version: 1.0\n\n'
            f"--B\nContent-Type: text/x-custom\n\nbefore the handler\n"
            f"--B\nContent-Type: text/part-handler\n\n{HANDLER.format(version=version, log=log)}\n"
            f"--B\nContent-Type: text/x-custom\n\ncustom payload\n"
            f"--B\nContent-Type: text/x-other\n\nnobody wants this\n--B--\n").encode()


def test_handler_gets_later_parts_of_its_types(tmp_path):
    log = tmp_path / "log"
    processed = process_userdata(blob(str(log)))
    # part-001 comes before any handler: an error now; later unknown parts may be for the handler
    assert len(processed.errors) == 1 and processed.errors[0].startswith("part-001")
    assert not log.exists()                            # nothing ran during processing
    errors = run_part_handlers(processed, str(tmp_path / "instance"))
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [["__begin__", None, None, 1], ["text/x-custom", "part-003", "custom payload", 1],
                     ["__end__", None, None, 1]]
    assert (tmp_path / "instance/handlers/part-handler-000.py").stat().st_mode & 0o777 == 0o600
    assert len(errors) == 1 and "part-004" in errors[0] and "text/x-other" in errors[0]


def test_handler_version_3_gets_headers(tmp_path):
    log = tmp_path / "log"
    run_part_handlers(process_userdata(blob(str(log), version=3)), str(tmp_path / "i"))
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(c[3] == 2 for c in calls)


def test_broken_handler_is_an_error_not_a_crash(tmp_path):
    processed = process_userdata("#part-handler\nraise RuntimeError('boom')\n")
    errors = run_part_handlers(processed, str(tmp_path))
    assert len(errors) == 1 and "part-handler-000" in errors[0] and "boom" in errors[0]
