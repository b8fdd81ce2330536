"""The target-root layer: confinement, atomic writes with mode and owner, chrooted commands."""

from __future__ import annotations

import os
import stat

import pytest

from cloudseed.core.root import CommandError, TargetRoot


def test_write_sets_mode_and_owner_atomically(target):
    target.write("/etc/app/secret.conf", "s3cret\n", mode=0o600, owner="nobody", group="nogroup")
    host = os.path.join(target.top, "etc/app/secret.conf")
    st = os.stat(host)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert (st.st_uid, st.st_gid) == (65534, 65534)
    with open(host) as f:
        assert f.read() == "s3cret\n"
    # no temporary files left beside it
    assert os.listdir(os.path.dirname(host)) == ["secret.conf"]


def test_owner_names_resolve_in_the_target_not_the_host(target):
    with open(os.path.join(target.top, "etc/passwd"), "a") as f:
        f.write("appuser:x:4242:4242::/home/appuser:/bin/sh\n")
    target.write("/srv/x", "data", owner="appuser")
    assert os.stat(os.path.join(target.top, "srv/x")).st_uid == 4242


def test_unknown_owner_is_a_clear_error_and_nothing_is_written(target):
    with pytest.raises(Exception, match="unknown user 'ghost'"):
        target.write("/srv/ghost", "data", owner="ghost")
    assert not os.path.exists(os.path.join(target.top, "srv/ghost"))


def test_absolute_symlink_is_rerooted_not_followed_out(target, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(target.top, "escape"))
    target.write("/escape/file", "inside")
    assert not (outside / "file").exists()
    # the link was resolved as if the root were /: /<outside path> inside the root
    assert os.path.exists(os.path.join(target.top, str(outside).lstrip("/"), "file"))


def test_relative_dotdot_symlink_cannot_climb_out(target, tmp_path):
    os.symlink("../../../../../../../../tmp", os.path.join(target.top, "up"))
    host = target.path("/up/x")
    assert host.startswith(target.top + os.sep)


def test_writing_over_a_symlink_replaces_the_link(target, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("original")
    os.makedirs(os.path.join(target.top, "etc"), exist_ok=True)
    os.symlink(str(victim), os.path.join(target.top, "etc/motd"))
    target.write("/etc/motd", "new")
    assert victim.read_text() == "original"
    assert not os.path.islink(os.path.join(target.top, "etc/motd"))


def test_append_keeps_existing_content(target):
    target.write("/var/log/x.log", "one\n")
    target.write("/var/log/x.log", "two\n", append=True)
    assert target.read_text("/var/log/x.log") == "one\ntwo\n"


def test_commands_run_chrooted(shell_target):
    out = shell_target.run(["/bin/sh", "-c", "echo hi > /proof; cat /etc/os-release"]).stdout
    assert "ID=debian" in out
    assert os.path.exists(os.path.join(shell_target.top, "proof"))


def test_failing_command_raises_with_status(shell_target):
    with pytest.raises(CommandError) as info:
        shell_target.run(["/bin/sh", "-c", "echo oops >&2; exit 3"])
    assert info.value.returncode == 3 and "oops" in str(info.value)


def test_missing_interpreter_is_named(target):
    target.write("/usr/local/bin/tool", "#!/bin/nonexistent\n", mode=0o755)
    if os.geteuid() != 0:
        pytest.skip("chroot needs root")
    with pytest.raises(CommandError, match="interpreter"):
        target.run(["/usr/local/bin/tool"])


def test_live_root_paths_are_plain():
    live = TargetRoot("/")
    assert live.is_live and live.path("/etc/../etc/hostname") == os.path.realpath("/etc/hostname")
