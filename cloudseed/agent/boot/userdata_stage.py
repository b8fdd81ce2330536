"""The network stage's user-data step: process user-data and vendor-data and put them in place.

Raw blobs are kept 0600 in the instance directory; scripts go where the final-stage modules
run them (instance ``scripts/``, ``scripts/vendor/``, the per-frequency directories);
boothooks run now, every boot, with ``INSTANCE_ID`` set. The cloud-config of both is
validated (warnings only) and merged over the system config.

A new instance's user-data is parsed, and its cloud-config checked, before the stage starts
(``prepare``: the local stage's datasource holds it, and the boot's process idles while networking
gets its address); nothing is written, run or fetched then, and the stage takes from it only what
has exactly the same input: a YAML document of the same text, the schema warnings of the same config.

On a reboot of the same instance the work is per boot only: files whose content is unchanged are
not rewritten (each write is an fsync on the boot's critical path), and the schema check (which
loads every module's schema) is not repeated for a cloud-config it already checked: its warnings
are kept in the instance directory, keyed by the config, the os-release and the agent's code.
"""

from __future__ import annotations

import json
import logging

from cloudseed.agent.config import merge_config
from cloudseed.agent.state import SCRIPT_DIRS, json_text
from cloudseed.core.root import CommandError

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings

if TYPE_CHECKING:
    from typing import Any

    from cloudseed.agent.boot.boot_state import BootState

LOG = logging.getLogger("cloudseed.userdata")
_TRUST_SETTINGS = {"trusted_userdata_keys", "require_signed_userdata"}  # cloudseed.agent.userdata_trust


def consume(state: BootState, data: dict, errors: list[str], warnings: list[str]) -> dict:
    """``data`` is this stage's instance data (for templates); returns the merged config."""
    from cloudseed.agent.userdata import kept_yaml, merge_vendor_under_user, process_userdata, vendor_data_policy
    from cloudseed.agent.userdata.includes import IncludeCache

    ds = state.datasource
    assert ds is not None
    root, paths = state.root, state.paths
    idir = paths.instance_dir(ds.instance_id)
    if _TRUST_SETTINGS & state.system_cfg.keys():  # signed user-data (nothing imported without it)
        from cloudseed.agent import userdata_trust

        userdata_trust.check(state.system_cfg, ds, errors)  # refused (unsigned, badly signed) blobs become None
    cache = IncludeCache(root, f"{idir}/include-once")  # written through the root, 0600

    blobs = (("user-data", ds.userdata_raw), ("vendor-data", ds.vendordata_raw), ("vendor-data2", ds.vendordata2_raw))
    try:
        warnings.extend(changed_since_provisioned(root, idir, blobs))
    except OSError as e:  # a full or read-only disk: the record is missing, the boot goes on
        errors.append(f"instance record not kept: {e}")
    for name, blob in blobs:
        _write_changed(root, f"{idir}/{name}.txt", blob or b"", errors=errors)

    # cloud-config documents parsed at an earlier boot of this instance: a reboot loads no PyYAML
    kept_file = f"{idir}/{kept_yaml.FILE_NAME}"
    kept = kept_yaml.KeptYaml(root.read_bytes(kept_file) if root.isfile(kept_file) else None)
    prepared = state.prepared or {}
    if prepared.get("yaml") is not None:
        kept.learn(prepared["yaml"])  # documents parsed while networking came up
    user = process_userdata(ds.userdata_raw, instance_data=data, include_cache_dir=cache, root=root,
                            kept_yaml=kept)
    errors.extend(f"user-data: {e}" if not e.startswith("user-data") else e for e in user.errors)
    if isinstance(user.cloud_config, dict) and _TRUST_SETTINGS & user.cloud_config.keys():
        warnings.append(f"user-data: {', '.join(sorted(_TRUST_SETTINGS & user.cloud_config.keys()))}: only the "
                        "image's configuration sets them; ignored here")
    _write_changed(root, f"{idir}/user-data.processed.json", json_text(user.to_json(), sort_keys=False),
                   errors=errors)

    policy = vendor_data_policy(merge_config(state.system_cfg, user.cloud_config or {}))
    if policy.problem:
        warnings.append(policy.problem)
    vendor_cfgs: list[dict] = []
    if policy.enabled:
        for name, blob in (("vendor-data", ds.vendordata_raw), ("vendor-data2", ds.vendordata2_raw)):
            if not blob:
                continue
            vendor = process_userdata(blob, instance_data=data, include_cache_dir=cache, root=root,
                                      excluded_types=policy.disabled_handlers, kept_yaml=kept)
            errors.extend(f"{name}: {e}" for e in vendor.errors)
            _write_changed(root, f"{idir}/{name}.processed.json", json_text(vendor.to_json(), sort_keys=False),
                           errors=errors)
            if vendor.cloud_config:
                vendor_cfgs.append(vendor.cloud_config)
            _place_scripts(state, idir, vendor, vendor=True, errors=errors)
    else:
        LOG.info("vendor data is switched off by the configuration")

    _write_changed(root, kept_file, kept.text(), errors=errors)
    _place_scripts(state, idir, user, vendor=False, errors=errors)
    _run_boothooks(state, idir, user.boothooks, errors)
    _run_part_handlers(state, user, errors, warnings)

    vendor_cfg: dict[str, Any] = {}
    for one in vendor_cfgs:
        vendor_cfg = merge_vendor_under_user(vendor_cfg, one) if vendor_cfg else one
    user_cfg = merge_vendor_under_user(vendor_cfg, user.cloud_config) if vendor_cfg else (user.cloud_config or {})
    _validate(user_cfg, warnings, root, cache=f"{idir}/cloud-config.checked.json", errors=errors,
              checked=prepared.get("checks"))
    _write_changed(root, f"{idir}/cloud-config.json", json_text(user_cfg, sort_keys=False), errors=errors)
    # a datasource's own config (Azure's admin user) sits over the system config, under user-data
    return merge_config(merge_config(state.system_cfg, ds.extra.get("cloud_config") or {}), user_cfg)


def prepare(state: BootState) -> None:
    """Before the network stage: parse the user-data (no include fetched, no template rendered,
    nothing written or run) and check the cloud-config it gives, into ``state.prepared`` for
    ``consume``: the parsed documents by their text, the schema's warnings by the key of
    ``_validation_key`` (the config, the os-release, the agent's code). What the stage then
    processes differently (includes, templates, vendor-data) is simply not found there.

    Under emulation in the lab guest parsing and checking took part of the ~0.3 s of a first boot's
    network stage outside its modules, on sshd's path; networking's DHCP leaves seconds idle before it."""
    from cloudseed.agent.userdata import kept_yaml, process_userdata

    ds = state.datasource
    if ds is None or not ds.userdata_raw or _TRUST_SETTINGS & state.system_cfg.keys():
        return  # signed user-data is checked first, in the stage
    kept = kept_yaml.KeptYaml()
    user = process_userdata(ds.userdata_raw, allow_includes=False, root=state.root, kept_yaml=kept)
    state.prepared = {"yaml": kept, "checks": {}}
    if user.errors or not isinstance(user.cloud_config, dict) or ds.vendordata_raw or ds.vendordata2_raw:
        return  # the stage's config will not be this one: only the documents are of use
    state.prepared["config"] = user.cloud_config  # which modules preloading imports (performance._may_run)
    found: list[str] = []
    key = _validation_key(user.cloud_config, state.root)
    _check(user.cloud_config, found, state.root)
    state.prepared["checks"][key] = found


PROVISIONED_DIGESTS = "provisioned-data.json"  # in the instance directory: the data it was provisioned from
CHANGED_ADVICE = ("changed since this instance was provisioned; per-instance modules were not re-run: use "
                  "`cloudseed clean --reboot` or a new instance-id")


def changed_since_provisioned(root: Any, idir: str, blobs: tuple) -> list[str]:
    """Warnings for user-data (vendor-data) that changed under the same instance-id since it was
    provisioned (cloud-init says nothing and runs none of it again: #6878, #5749, #4359).

    The first boot of an instance records each blob's SHA-256; every later boot compares."""
    import hashlib

    now = {name: hashlib.sha256(blob or b"").hexdigest() for name, blob in blobs}
    inner = f"{idir}/{PROVISIONED_DIGESTS}"
    try:
        then = json.loads(root.read_text(inner)) if root.isfile(inner) else None
    except ValueError:
        then = None
    if not isinstance(then, dict):
        root.write(inner, json_text(now), mode=0o600)
        return []
    return [f"{name} {CHANGED_ADVICE}" for name in now if then.get(name) not in (None, now[name])]


def _place_scripts(state: BootState, idir: str, processed: Any, vendor: bool, errors: list[str]) -> None:
    root = state.root
    target = f"{idir}/scripts/vendor" if vendor else f"{idir}/scripts"
    places = [(f"{target}/{part.name}", part) for part in processed.scripts]
    places += [(f"{SCRIPT_DIRS[freq][0]}/{part.name}", part)
               for freq, parts in processed.scripts_per_freq.items() for part in parts]
    for inner, part in places:
        try:
            root.write(inner, part.content, mode=0o700)
        except OSError as e:  # a full or read-only disk: this script only, named
            errors.append(f"script {part.name} not placed: {e}")


def _run_boothooks(state: BootState, idir: str, boothooks: list, errors: list[str]) -> None:
    from cloudseed.agent.scripts import run_script

    iid = state.datasource.instance_id if state.datasource else ""
    for part in boothooks:
        inner = f"{idir}/boothooks/{part.name}"
        content = part.content
        if not content.startswith(b"#!"):
            # a "#cloud-boothook" body without an interpreter line runs under /bin/sh
            content = b"#!/bin/sh\n" + content
        try:
            state.root.write(inner, content, mode=0o700)
            run_script(state.root, inner, env={"INSTANCE_ID": iid})
        except CommandError as e:
            errors.append(f"boothook {part.name}: exited {e.returncode}")
        except OSError as e:  # a full or read-only disk: not placed, so not run
            errors.append(f"boothook {part.name}: not run: {e}")


def _run_part_handlers(state: BootState, processed: Any, errors: list[str], warnings: list[str]) -> None:
    if not processed.handlers:
        return
    try:
        from cloudseed.agent.userdata.part_handlers import run_part_handlers
    except ImportError:
        warnings.append("part-handlers were given but cannot be run by this version")
        return
    if not state.root.is_live:
        warnings.append("part-handlers are not run against an offline root (they are host Python code)")
        return
    errors.extend(run_part_handlers(processed, state.paths.instance_dir(state.datasource.instance_id)))


def _write_changed(root: Any, inner: str, content: str | bytes, mode: int = 0o600,
                   errors: list[str] | None = None) -> None:
    """Write ``inner`` (0600) unless it already holds exactly ``content`` with that mode.

    With ``errors``, a write that fails (a full or read-only disk) is recorded there and the stage
    goes on: these are the instance's records and caches, not what the modules need to run."""
    if errors is None:
        _write_if_changed(root, inner, content, mode)
        return
    try:
        _write_if_changed(root, inner, content, mode)
    except OSError as e:
        errors.append(f"instance record not kept: {e}")


def _write_if_changed(root: Any, inner: str, content: str | bytes, mode: int) -> None:
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    import os
    import stat

    try:
        info = os.lstat(root.path_nofollow(inner))
        if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == mode and root.read_bytes(inner) == data:
            return
    except OSError:
        pass
    from cloudseed.core.root import RootError

    try:
        root.write(inner, data, mode=mode)
    except RootError:  # a directory where this state file belongs: set aside, named in the status
        from cloudseed.agent.state.files import clear_for_file

        if not clear_for_file(root, inner):
            raise
        root.write(inner, data, mode=mode)


def _validation_key(cfg: dict, root: Any) -> str:
    """What the schema check's verdict depends on: the config, the os-release, the agent's code."""
    import hashlib
    import os
    from importlib.util import find_spec

    import cloudseed

    parts = [json_text(cfg), cloudseed.__version__]
    if root is not None:
        parts += [root.read_text(name, default="") for name in ("/etc/os-release", "/usr/lib/os-release")]
    for name in ("cloudseed.agent.config.schema", "cloudseed.agent.modules"):
        spec = find_spec(name)
        origin = spec.origin if spec else None
        for path in filter(None, (origin, os.path.dirname(origin) if origin else None)):
            try:
                info = os.stat(path)
                parts.append(f"{path}:{info.st_mtime_ns}:{info.st_size}")
            except OSError:
                parts.append(path)
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def _validate(cfg: dict, warnings: list[str], root: Any = None, cache: str | None = None,
              errors: list[str] | None = None, checked: dict | None = None) -> None:
    """Schema problems in the user's cloud-config become warnings; they never stop the boot.

    Keys not done here say why, naming the target's distro (``schema.classify_keys``). With
    ``cache`` (a file in the instance directory), a config already checked is not checked again;
    ``checked``: warnings found before the stage (``prepare``), by the same key."""
    if not cfg:
        return
    key = _validation_key(cfg, root) if cache and root is not None else None
    if key:
        from cloudseed.agent.state import read_json

        earlier = read_json(root, cache)
        if isinstance(earlier, dict) and earlier.get("key") == key and isinstance(earlier.get("warnings"), list):
            warnings.extend(str(w) for w in earlier["warnings"])
            return
    if key and checked and isinstance(checked.get(key), list):
        found = list(checked[key])
    else:
        found = []
        _check(cfg, found, root)
    warnings.extend(found)
    if key:
        _write_changed(root, cache, json_text({"key": key, "warnings": found}), errors=errors)


def _check(cfg: dict, found: list[str], root: Any) -> None:
    """The schema check itself: its warnings appended to ``found``."""
    try:
        from cloudseed.agent.config.schema import validate_config
        from cloudseed.agent.distros import read_os_release
    except ImportError:
        return
    # the status is world-readable: messages name keys and types, never the user's values
    found += [f"cloud-config: {problem}" for problem in
              validate_config(cfg, os_release=read_os_release(root) if root is not None else None,
                              show_values=False)]
