"""seed_random: data and metadata seed into a file; a required command that is missing fails.
"""

from __future__ import annotations

from tests.agent.modules.module_support import run


def test_seed_random_regular_file(target):
    from tests.agent.modules.module_support import InputDatasource

    ds = InputDatasource(metadata={"random_seed": "from-metadata"})
    result, _ = run(target, "seed_random", {"random_seed": {"file": "/var/seed", "data": "aGVsbG8=",
                                                            "encoding": "b64"}}, datasource=ds)
    assert result.status == "ok", result.reason
    assert target.read_bytes("/var/seed") == b"hellofrom-metadata"
    result, _ = run(target, "seed_random", {"random_seed": {"command": ["no-such-tool"], "command_required": True}})
    assert result.status == "failed" and "random_seed.command" in result.reason
