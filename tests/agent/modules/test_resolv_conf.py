"""resolv_conf: /etc/resolv.conf from the config; a bad nameserver is named and nothing is replaced.
"""

from __future__ import annotations

from tests.agent.modules.module_support import run


def test_resolv_conf(target):
    cfg = {"manage_resolv_conf": True, "resolv_conf": {
        "nameservers": ["192.0.2.53", "2001:db8::53"], "searchdomains": ["a.example", "b.example"],
        "domain": "example", "options": {"rotate": True, "timeout": 2, "debug": False}}}
    result, _ = run(target, "resolv_conf", cfg)
    assert result.status == "ok", result.reason
    lines = target.read_text("/etc/resolv.conf").splitlines()
    assert lines[1:] == ["nameserver 192.0.2.53", "nameserver 2001:db8::53", "search a.example b.example",
                         "domain example", "options rotate timeout:2"]
    bad = {"manage_resolv_conf": True, "resolv_conf": {"nameservers": ["dns.example"]}}
    result, _ = run(target, "resolv_conf", bad)
    assert result.status == "failed" and "resolv_conf.nameservers[0]" in result.reason
    assert "192.0.2.53" in target.read_text("/etc/resolv.conf")
