"""The module framework's distro rule: families or os-release IDs, and configured keys never silently skipped."""

from __future__ import annotations

from tests.agent.modules.module_support import run

UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'


def test_a_module_for_another_distro_is_skipped_with_a_warning_naming_its_keys(target):
    result, ctx = run(target, "byobu", {"byobu_by_default": "enable-user"})   # byobu: Debian family
    assert result.status != "skipped"
    target.write("/etc/os-release", 'ID="rocky"\nID_LIKE="rhel centos fedora"\n')
    result, ctx = run(target, "byobu", {"byobu_by_default": "enable-user"})
    assert result.status == "skipped"
    assert result.reason == "not applicable to rocky (rhel family): byobu is for debian"
    assert ctx.warnings == ["byobu: byobu_by_default not applied: not applicable to rocky (rhel family): "
                            "byobu is for debian"]


def test_os_release_ids_select_within_a_family(target):
    from cloudseed.agent.distros import get_distro
    from cloudseed.agent.modules import ModuleSpec, supports

    spec = ModuleSpec("landscape", "final", distros=("ubuntu",))
    assert not supports(spec, get_distro(target, {}))
    target.write("/etc/os-release", UBUNTU)
    assert supports(spec, get_distro(target, {}))
    assert supports(ModuleSpec("keyboard", "config", distros=("debian", "rhel")), get_distro(target, {}))
