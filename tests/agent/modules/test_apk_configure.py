"""apk_configure: the repositories file on Alpine; elsewhere the keys are reported, not applied."""

from __future__ import annotations

from tests.agent.modules.module_support import run

ALPINE = 'NAME="Alpine Linux"\nID=alpine\nVERSION_ID=3.20.3\n'


def _urls(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_release_with_community_and_local_repository(target):
    target.write("/etc/os-release", ALPINE)
    result, _ = run(target, "apk_configure", {"apk_repos": {
        "alpine_repo": {"version": "v3.20", "community_enabled": True},
        "local_repo_base_url": "https://repo.example.com/alpine/local/"}})
    assert result.status == "ok", result.reason
    assert _urls(target.read_text("/etc/apk/repositories")) == [
        "https://alpine.global.ssl.fastly.net/alpine/v3.20/main",
        "https://alpine.global.ssl.fastly.net/alpine/v3.20/community",
        "https://repo.example.com/alpine/local/v3.20"]


def test_testing_on_edge_and_a_warning_comment_elsewhere(target):
    target.write("/etc/os-release", ALPINE)
    run(target, "apk_configure", {"apk_repos": {"alpine_repo": {
        "version": "edge", "base_url": "https://m.example/alpine", "testing_enabled": True}}})
    text = target.read_text("/etc/apk/repositories")
    assert _urls(text) == ["https://m.example/alpine/edge/main", "https://m.example/alpine/edge/testing"]
    assert "may break" not in text
    run(target, "apk_configure", {"apk_repos": {"alpine_repo": {"version": "v3.19", "testing_enabled": True}}})
    assert "may break the system" in target.read_text("/etc/apk/repositories")


def test_preserve_and_missing_version(target):
    target.write("/etc/os-release", ALPINE)
    target.write("/etc/apk/repositories", "keep me\n")
    result, _ = run(target, "apk_configure", {"apk_repos": {"preserve_repositories": True,
                                                            "alpine_repo": {"version": "v3.20"}}})
    assert result.status == "ok" and target.read_text("/etc/apk/repositories") == "keep me\n"
    result, _ = run(target, "apk_configure", {"apk_repos": {"alpine_repo": {"community_enabled": True}}})
    assert result.status == "failed" and "apk_repos.alpine_repo.version: missing" in result.reason
    assert target.read_text("/etc/apk/repositories") == "keep me\n"


def test_on_debian_the_keys_are_reported_not_applied(target):
    result, ctx = run(target, "apk_configure", {"apk_repos": {"alpine_repo": {"version": "v3.20"}}})
    assert result.status == "skipped" and not target.exists("/etc/apk/repositories")
    assert ctx.warnings == ["apk_configure: apk_repos not applied: not applicable to debian (debian family): "
                            "apk_configure is for alpine"]
