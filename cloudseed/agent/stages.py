"""The four boot stages: local, network (init), config, final — and all four in one process.

local:   find a datasource that needs no network, decide whether this is a new instance,
         write the network configuration before networking starts.
network: find a network datasource if none was found, process user-data and vendor-data,
         run boothooks and the init modules.
config:  the config modules.        final: the final modules (user scripts, final message).
A stage never raises: problems are logged, recorded in status, and the stage carries on.
"""

from __future__ import annotations

import logging
import time

from cloudseed.agent import instance_data
from cloudseed.agent.config import is_disabled, load_system_config, read_cmdline
from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext
from cloudseed.agent.log import console
from cloudseed.agent.modules import STAGE_LIST_KEYS, ModuleContext, run_module, run_stage_modules
from cloudseed.agent.state import Paths, ensure_dirs, read_json, write_json
from cloudseed.agent.status import StatusRecorder
from cloudseed.core.root import TargetRoot
from cloudseed.core.values import as_bool, get_list

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.stages")

MODULE_STAGES = {"config": "config", "final": "final"}


class Agent:
    """One boot's worth of agent work against a target root."""

    def __init__(self, root: TargetRoot):
        self.root = root
        self.paths = Paths(root)
        self.cmdline = read_cmdline(root)
        self.config_errors: list[str] = []
        self.system_cfg = load_system_config(root, self.cmdline, errors=self.config_errors)
        self.status = StatusRecorder(self.paths)
        self.datasource: Datasource | None = None
        self.boot: dict[str, Any] = read_json(root, self.paths.run("boot.json")) or {}

    # ------------------------------------------------------------------ helpers
    def disabled_reason(self) -> str | None:
        reason = is_disabled(self.root, self.cmdline)
        if reason is None and self.root.exists(self.paths.run("disabled")):
            reason = self.root.read_text(self.paths.run("disabled")).strip() or "disabled by the generator"
        return reason

    def _ds_context(self, stage: str) -> DatasourceContext:
        return DatasourceContext(self.root, self.system_cfg, self.cmdline, self.paths, stage)

    def _save_datasource(self, ds: Datasource) -> None:
        data = ds.to_json()
        write_json(self.root, self.paths.boot_datasource_file, data, mode=0o600)
        write_json(self.root, f"{self.paths.instance_dir(ds.instance_id)}/datasource.json", data, mode=0o600)

    def _load_datasource(self) -> Datasource | None:
        """The datasource found earlier this boot (or, failing that, the last instance's cache)."""
        from cloudseed.agent.datasources import datasource_class

        for inner in (self.paths.boot_datasource_file, f"{self.paths.instance_link}/datasource.json"):
            data = read_json(self.root, inner)
            if isinstance(data, dict) and data.get("name"):
                try:
                    cls = datasource_class(data["name"])
                except (ImportError, AttributeError):
                    continue
                return cls.from_json(self._ds_context(NETWORK), data)
        return None

    def _adopt(self, ds: Datasource) -> bool:
        """Record ``ds`` as this boot's datasource; True when its instance is new."""
        iid = ds.instance_id
        previous = self.root.read_text(self.paths.current_instance_file, default="").strip()
        new_instance = previous != iid
        ensure_dirs(self.paths)
        idir = self.paths.instance_dir(iid)
        self.root.makedirs(idir, mode=0o755)
        self.root.makedirs(f"{idir}/scripts", mode=0o700)
        self.root.makedirs(f"{idir}/sem", mode=0o755)
        if new_instance:
            self.root.write(self.paths.previous_instance_file, (previous or "") + "\n")
            self.root.write(self.paths.current_instance_file, iid + "\n")
            LOG.info("new instance %s (previous: %s)", iid, previous or "none")
        self.root.symlink(idir, self.paths.instance_link)
        self.datasource = ds
        self._save_datasource(ds)
        self.boot = {"instance_id": iid, "new_instance": new_instance or bool(self.boot.get("new_instance")),
                     "datasource": ds.name}
        write_json(self.root, self.paths.run("boot.json"), self.boot)
        return new_instance

    def _write_instance_data(self, data: dict) -> None:
        try:
            instance_data.write(self.paths, data)
        except (OSError, TypeError, ValueError) as e:
            LOG.error("cannot write instance data: %s", e)

    def _stage_instance_data(self, cfg: dict) -> dict:
        """This boot's instance data when it describes the datasource in use; else built anew and written."""
        data = instance_data.load(self.paths)
        iid = self.datasource.instance_id if self.datasource else None
        if isinstance(data, dict) and (data.get("v1") or {}).get("instance_id") == iid:
            return data
        data = instance_data.build(self.root, self.datasource, cfg)
        self._write_instance_data(data)
        return data

    def _begin(self, stage: str) -> float:
        console(f"cloudseed: stage {stage} start")
        self.status.start(stage)
        return time.monotonic()

    def _end(self, stage: str, started: float, errors: list[str], warnings: list[str],
             modules: list[dict]) -> int:
        elapsed = time.monotonic() - started
        ds_name = self.datasource.name if self.datasource else None
        self.status.finish(stage, errors, warnings, modules, ds_name)
        console(f"cloudseed: stage {stage} finished in {elapsed:.2f}s "
                f"({len(modules)} modules, {len(errors)} errors)")
        return 1 if errors else 0

    # ------------------------------------------------------------------ local
    def run_local(self) -> int:
        reason = self.disabled_reason()
        if reason:
            self.status.mark_disabled(reason)
            console(f"cloudseed: disabled ({reason})")
            return 0
        started = self._begin("local")
        errors: list[str] = list(self.config_errors)
        warnings: list[str] = []
        try:
            ensure_dirs(self.paths)
            self.boot = {}
            self.root.remove(self.paths.boot_datasource_file)
            first_boot = not self.root.exists(self.paths.current_instance_file)
            ds = self._find(LOCAL, errors)
            new_instance = self._adopt(ds) if ds else False
            warnings.extend(getattr(ds, "warnings", []) if ds else [])
            self._apply_network(ds, new_instance, errors, warnings)
            self._write_instance_data(instance_data.build(self.root, ds, self.system_cfg))
            if new_instance or (ds is None and first_boot):
                # last: the key generation then overlaps with network bring-up, not with this stage
                self._start_host_keys_early()
            self._prefetch_for_network_stage()
        except Exception as e:  # the stage itself must finish and say what happened
            LOG.exception("local stage failed")
            self.status.crash("local", f"local stage: {type(e).__name__}: {e}")
            return 1
        return self._end("local", started, errors, warnings, [])

    def _prefetch_for_network_stage(self) -> None:
        """Have the kernel read ahead the files the network stage imports (it starts after DHCP)."""
        if self.root.is_live:
            from cloudseed.agent import prefetch

            prefetch.warm(prefetch.network_stage_files())

    def _start_host_keys_early(self) -> None:
        """Begin SSH host key generation now so it overlaps with network bring-up (ssh adopts them)."""
        if not as_bool(self.system_cfg.get("ssh_deletekeys"), True) or self.system_cfg.get("ssh") is False:
            return
        from cloudseed.agent import hostkeys

        types = self.system_cfg.get("ssh_genkeytypes", hostkeys.DEFAULT_TYPES)
        try:
            early = hostkeys.early_types([str(t) for t in get_list({"t": types}, "t")])
            started = hostkeys.start_early(self.root, early)
        except OSError as e:
            LOG.info("early host key generation not started: %s", e)
            return
        if started:
            LOG.info("host keys %s are being generated in the background", ", ".join(started))

    def _find(self, stage: str, errors: list[str]) -> Datasource | None:
        from cloudseed.agent.datasources import find_datasource
        from cloudseed.agent.detect import datasource_names

        names, _source = datasource_names(self.system_cfg, self.cmdline)  # ci.ds= on the command line wins
        search = find_datasource(self._ds_context(stage), self._possible(names))
        errors.extend(search.errors)
        return search.datasource

    def _possible(self, names: list[str]) -> list[str]:
        """``names`` less the datasources the generator found cannot exist here."""
        enabled = read_json(self.root, self.paths.run("enabled"))
        if not isinstance(enabled, dict) or not isinstance(enabled.get("datasources"), list):
            return names
        possible = {str(entry[0] if isinstance(entry, list) else entry).lower() for entry in enabled["datasources"]}
        return [n for n in names if n.lower() in possible or n.lower() == "none"]

    def _apply_network(self, ds: Datasource | None, new_instance: bool,
                       errors: list[str], warnings: list[str]) -> None:
        network_cfg = self.system_cfg.get("network")
        if isinstance(network_cfg, dict) and network_cfg.get("config") == "disabled":
            LOG.info("network configuration is disabled by the system config")
            return
        try:
            from cloudseed.network.apply import apply_network
        except ImportError as e:
            warnings.append(f"network configuration not applied: {e}")
            return
        from cloudseed.agent.distros import family_of, read_os_release

        try:
            report = apply_network(
                self.root, system_cfg=self.system_cfg,
                datasource_config=ds.network_config if ds else None, cmdline=self.cmdline,
                distro=family_of(read_os_release(self.root)),
                new_instance=new_instance or not self.root.exists(self.paths.current_instance_file),
                # at boot the network is not up yet and its own service raises it from these files;
                # when the agent runs on a running system, the new config is activated now
                bring_up=self.root.is_live and _network_is_up(self.root),
            )
            LOG.info("network: %s", report)
        except Exception as e:
            LOG.error("network configuration failed: %s", e)
            errors.append(f"network: {e}")

    # ------------------------------------------------------------------ network
    def run_network(self) -> int:
        reason = self.disabled_reason()
        if reason:
            self.status.mark_disabled(reason)
            return 0
        started = self._begin("network")
        errors: list[str] = []
        warnings: list[str] = []
        results: list[dict] = []
        try:
            ensure_dirs(self.paths)
            ds = self._load_datasource() if self.root.exists(self.paths.boot_datasource_file) else None
            if ds is None:
                ds = self._find(NETWORK, errors)
                if ds is None:
                    ds = self._none_datasource()
                    warnings.append("no datasource found; using the None datasource")
                self._adopt(ds)
                warnings.extend(getattr(ds, "warnings", []))
            self.datasource = ds
            cfg = self.consume_userdata(errors, warnings)
            data = instance_data.build(self.root, ds, cfg)
            self._write_instance_data(data)  # before the modules: they and their scripts may query it
            ctx = self._module_context("init", cfg, data)
            results = [r.to_json() for r in run_stage_modules(ctx, get_list(cfg, STAGE_LIST_KEYS["init"]))]
            warnings.extend(ctx.warnings)
            errors.extend(f"{r['name']}: {r.get('reason', 'failed')}" for r in results if r["status"] == "failed")
            self._write_instance_data(ctx.instance_data)
        except Exception as e:
            LOG.exception("network stage failed")
            self.status.crash("network", f"network stage: {type(e).__name__}: {e}")
            return 1
        return self._end("network", started, errors, warnings, results)

    def _none_datasource(self) -> Datasource:
        from cloudseed.agent.datasources.none import NoneDatasource

        ds = NoneDatasource(self._ds_context(NETWORK))
        ds.fetch()
        return ds

    def consume_userdata(self, errors: list[str], warnings: list[str]) -> dict:
        """Process user-data and vendor-data, place scripts and boothooks, return the merged config."""
        from cloudseed.agent.userdata_stage import consume

        assert self.datasource is not None
        cfg = consume(self, errors, warnings)
        write_json(self.root, self.paths.combined_config_file, cfg, mode=0o600)
        return cfg

    def _module_context(self, stage: str, cfg: dict, data: dict) -> ModuleContext:
        iid = self.datasource.instance_id if self.datasource else "iid-datasource-none"
        return ModuleContext(root=self.root, paths=self.paths, cfg=cfg, instance_id=iid, stage=stage,
                             datasource=self.datasource, instance_data=data)

    def _combined_config(self, warnings: list[str]) -> dict:
        cfg = read_json(self.root, self.paths.combined_config_file)
        if isinstance(cfg, dict):
            return cfg
        warnings.append("no processed user-data from this boot; using the system config only")
        return dict(self.system_cfg)

    # ------------------------------------------------------------------ config / final
    def run_modules(self, stage: str) -> int:
        if stage not in MODULE_STAGES:
            raise ValueError(f"unknown module stage {stage!r} (config or final)")
        reason = self.disabled_reason()
        if reason:
            self.status.mark_disabled(reason)
            return 0
        started = self._begin(stage)
        errors: list[str] = []
        warnings: list[str] = []
        results: list[dict] = []
        try:
            self.datasource = self._load_datasource()
            cfg = self._combined_config(warnings)
            ctx = self._module_context(stage, cfg, self._stage_instance_data(cfg))
            results = [r.to_json() for r in run_stage_modules(ctx, get_list(cfg, STAGE_LIST_KEYS[stage]))]
            warnings.extend(ctx.warnings)
            errors.extend(f"{r['name']}: {r.get('reason', 'failed')}" for r in results if r["status"] == "failed")
        except Exception as e:
            LOG.exception("%s stage failed", stage)
            self.status.crash(stage, f"{stage} stage: {type(e).__name__}: {e}")
            return 1
        return self._end(stage, started, errors, warnings, results)

    def run_single(self, name: str, frequency: str | None) -> int:
        """Run one module now (``cloudseed single``), honouring or overriding its frequency."""
        self.datasource = self._load_datasource()
        warnings: list[str] = []
        cfg = self._combined_config(warnings)
        ctx = self._module_context("single", cfg, self._stage_instance_data(cfg))
        result = run_module(ctx, name, frequency)
        console(f"cloudseed: module {result.name}: {result.status}" + (f" ({result.reason})" if result.reason else ""))
        return 1 if result.status == "failed" else 0

    def run_all(self) -> int:
        """All four stages in this one process (the fast path)."""
        codes = [self.run_local()]
        if self.disabled_reason():
            return 0
        codes.append(self.run_network())
        codes.append(self.run_modules("config"))
        codes.append(self.run_modules("final"))
        return max(codes)


def _network_is_up(root: TargetRoot) -> bool:
    """Is any interface other than loopback administratively up (a running system, not early boot)?"""
    for name in root.listdir("/sys/class/net"):
        if name == "lo":
            continue
        try:
            flags = int(root.read_text(f"/sys/class/net/{name}/flags", default="0").strip(), 16)
        except ValueError:
            continue
        if flags & 0x1:  # IFF_UP
            return True
    return False
