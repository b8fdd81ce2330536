"""keyboard: the layout files of each family, read back the way their readers read them."""

from __future__ import annotations

import subprocess

from tests.agent.modules.module_support import run


def _sourced(path: str) -> dict[str, str]:
    """The XKB variables a shell gets from sourcing ``path`` (as console-setup does)."""
    out = subprocess.run(["sh", "-c", f'. "{path}"; printf "%s|%s|%s|%s" "$XKBMODEL" "$XKBLAYOUT" '
                          '"$XKBVARIANT" "$XKBOPTIONS"'], capture_output=True, text=True, check=True).stdout
    return dict(zip(("model", "layout", "variant", "options"), out.split("|")))


def test_debian_default_keyboard_is_written_and_other_lines_kept(target):
    target.makedirs("/etc/default")
    target.write("/etc/default/keyboard", '# KEYBOARD CONFIGURATION FILE\nXKBLAYOUT="us"\nBACKSPACE="guess"\n')
    result, _ = run(target, "keyboard", {"keyboard": {"layout": "de", "variant": "nodeadkeys",
                                                      "options": "compose:rwin"}})
    assert result.status == "ok", result.reason
    assert _sourced(target.path("/etc/default/keyboard")) == {
        "model": "pc105", "layout": "de", "variant": "nodeadkeys", "options": "compose:rwin"}
    text = target.read_text("/etc/default/keyboard")
    assert text.count("XKBLAYOUT=") == 1 and 'BACKSPACE="guess"' in text and text.startswith("# KEYBOARD")


def test_debian_new_file_gets_backspace_default(target):
    result, _ = run(target, "keyboard", {"keyboard": {"layout": "fr", "model": "pc104"}})
    assert result.status == "ok", result.reason
    assert _sourced(target.path("/etc/default/keyboard"))["model"] == "pc104"
    assert 'BACKSPACE="guess"' in target.read_text("/etc/default/keyboard")


def test_rhel_vconsole_and_xorg(rhel_target):
    result, _ = run(rhel_target, "keyboard", {"keyboard": {"layout": "de", "variant": "nodeadkeys"}})
    assert result.status == "ok", result.reason
    vconsole = rhel_target.read_text("/etc/vconsole.conf")
    assert "XKBLAYOUT=de\n" in vconsole and "XKBMODEL=pc105\n" in vconsole and "XKBVARIANT=nodeadkeys\n" in vconsole
    xorg = rhel_target.read_text("/etc/X11/xorg.conf.d/00-keyboard.conf")
    assert 'Option "XkbLayout" "de"' in xorg and 'Option "XkbVariant" "nodeadkeys"' in xorg
    assert "XkbOptions" not in xorg and xorg.startswith('Section "InputClass"') and xorg.endswith("EndSection\n")


def test_value_that_a_shell_would_run_is_refused_and_nothing_written(target):
    result, _ = run(target, "keyboard", {"keyboard": {"layout": 'us"; touch /tmp/pwned; "'}})
    assert result.status == "failed"
    assert result.reason.startswith("keyboard.layout: expected an XKB name")
    assert not target.exists("/etc/default/keyboard")


def test_missing_layout_is_named(target):
    result, _ = run(target, "keyboard", {"keyboard": {"model": "pc105"}})
    assert result.status == "failed" and "keyboard.layout: missing" in result.reason
