"""RFC 6902 JSON patch as used by #cloud-config-jsonp parts."""

from __future__ import annotations

import pytest

from cloudseed.agent.userdata.json_patch import JsonPatchError, apply_patch, parse_patch


def patch(doc, ops):
    return apply_patch(doc, parse_patch(__import__("json").dumps(ops)))


def test_operations():
    doc = {"a": [1, 2], "b": {"c": 1}, "x/y": 0, "t~": 5}
    out = patch(doc, [
        {"op": "add", "path": "/a/0", "value": 0},
        {"op": "add", "path": "/a/-", "value": 3},
        {"op": "remove", "path": "/b/c"},
        {"op": "replace", "path": "/x~1y", "value": 1},
        {"op": "move", "from": "/t~0", "path": "/b/t"},
        {"op": "copy", "from": "/a", "path": "/a2"},
        {"op": "test", "path": "/a/3", "value": 3},
    ])
    assert out == {"a": [0, 1, 2, 3], "b": {"t": 5}, "x/y": 1, "a2": [0, 1, 2, 3]}
    assert doc == {"a": [1, 2], "b": {"c": 1}, "x/y": 0, "t~": 5}     # untouched


@pytest.mark.parametrize("ops", [
    [{"op": "remove", "path": "/nope"}],
    [{"op": "replace", "path": "/nope", "value": 1}],
    [{"op": "add", "path": "/a/5", "value": 1}],
    [{"op": "add", "path": "/a/01", "value": 1}],
    [{"op": "test", "path": "/a/0", "value": 2}],
    [{"op": "move", "from": "/b", "path": "/b/c"}],
])
def test_failures(ops):
    with pytest.raises(JsonPatchError):
        patch({"a": [1], "b": {}}, ops)


@pytest.mark.parametrize("text", ['{"op": "add"}', '[{"op": "frob", "path": "/a"}]', '[{"path": "/a"}]',
                                  '[{"op": "add", "path": "/a"}]', "not json"])
def test_malformed(text):
    with pytest.raises(JsonPatchError):
        parse_patch(text)
