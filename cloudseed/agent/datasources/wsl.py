"""WSL: user-data for a Windows Subsystem for Linux instance from the Windows user's profile.

Not in cloud-init 22.4: based on cloud-init 24.x's DataSourceWSL and its documentation (the WSL
datasource page). Possible where the kernel release (``/proc/sys/kernel/osrelease``) names
Microsoft (``...-microsoft-standard-WSL2``, WSL 1's ``...-Microsoft``) or WSL's interop handler is
registered (``/proc/sys/fs/binfmt_misc/WSLInterop``). Read:

* the instance name: ``datasource: WSL: {instance_name}``, else ``wslpath -am /`` (its last
  component), else ``WSL_DISTRO_NAME`` -- the last two only on the running system;
* the Windows home (``%USERPROFILE%`` as a Linux path): ``user_profile``, else ``cmd.exe /C echo
  %USERPROFILE%`` run through ``/init`` (on the running system, bounded), else the one
  ``<drive>/Users/<name>`` with a ``.cloud-init`` or ``.ubuntupro/.cloud-init`` folder, on the
  Windows drives mounted by WSL (9p ``aname=drvfs`` in ``/proc/mounts``; ``/mnt/c`` otherwise);
* ``<home>/.cloud-init/<instance>.meta-data`` (YAML with ``instance-id``; without it the
  instance id is ``iid-datasource-wsl``);
* user-data: the first of ``<instance>.user-data``, ``<ID>-<VERSION_ID>.user-data`` (the
  codename when there is no version), ``<ID>-all.user-data``, ``default.user-data`` in
  ``<home>/.cloud-init`` (names matched without regard to case, as Windows does); on Ubuntu,
  Landscape's ``<home>/.ubuntupro/.cloud-init/<instance>.user-data`` replaces it, and the Ubuntu
  Pro agent's ``agent.yaml`` there is merged over it (its top-level keys win). Cloud-config that
  is not YAML mappings on both sides becomes a MIME multipart of both (cloud-init hands a list).

WSL sets up the network itself: the network config is ``config: disabled`` (no fallback DHCP).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from cloudseed.agent.datasources import LOCAL, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import FileText, Path
from cloudseed.clouds.wsl import CLOUD, PRO_SEED, SEED

LOG = logging.getLogger("cloudseed.datasources.wsl")

DEFAULT_INSTANCE_ID = "iid-datasource-wsl"
NOT_USERS = {"public", "default", "default user", "all users"}
COMMAND_TIMEOUT = 5.0


class WSLError(Exception):
    """The Windows side could not be read; the message says what and where."""


def _run(argv: list[str], timeout: float) -> str | None:
    from cloudseed.core.root import run_on_machine

    proc = run_on_machine(argv, timeout=timeout)
    if proc.returncode != 0:
        if proc.returncode in (124, 127):
            LOG.debug("WSL: %s", proc.stderr.strip())
        return None
    return proc.stdout.strip() or None


class WSL(Datasource):
    name = "WSL"
    stages = (LOCAL,)
    platform = "wsl"
    detection = (
        FileText("/proc/sys/kernel/osrelease", "*microsoft*", nocase=True, why="kernel release '{value}' is WSL's"),
        Path(*(f"/proc/sys/fs/binfmt_misc/{n}" for n in ("WSLInterop", "WSLInterop-late")),
             why="{value} (WSL interop) exists"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "wsl"

    # -- where things are
    def _instance_name(self, section: dict) -> str | None:
        if section.get("instance_name"):
            return str(section["instance_name"])
        if not self.ctx.root.is_live:
            return None
        if os.access("/usr/bin/wslpath", os.X_OK):
            out = _run(["/usr/bin/wslpath", "-am", "/"], COMMAND_TIMEOUT)
            if out:
                return out.rstrip("/").replace("\\", "/").rpartition("/")[2] or None
        return os.environ.get("WSL_DISTRO_NAME") or None

    def _drives(self) -> list[str]:
        """Mount points (inside the root) of the Windows drives WSL mounted."""
        found = []
        for line in self.ctx.root.read_text("/proc/mounts", default="").splitlines():
            fields = line.split()
            drvfs = len(fields) >= 4 and (fields[2] == "drvfs" or (fields[2] == "9p" and "aname=drvfs" in fields[3]))
            if drvfs:
                found.append(fields[1].replace("\\040", " "))
        if not found and self.ctx.root.isdir("/mnt/c"):
            found.append("/mnt/c")
        return found

    def _home(self, section: dict) -> str:
        root = self.ctx.root
        if section.get("user_profile"):
            home = str(section["user_profile"])
            if not root.isdir(home):
                raise WSLError(f"datasource.WSL.user_profile {home} is not a directory")
            return home
        drives = self._drives()
        if not drives:
            raise WSLError("no Windows drive is mounted (WSL automount off?)")
        if root.is_live:
            home = self._home_from_cmd(drives)
            if home:
                return home
        candidates = []
        for drive in drives:
            for name in root.listdir(f"{drive}/Users"):
                home = f"{drive}/Users/{name}"
                if name.lower() in NOT_USERS or not root.isdir(home):
                    continue
                if root.isdir(f"{home}/{SEED}") or root.isdir(f"{home}/{PRO_SEED}"):
                    candidates.append(home)
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise WSLError(f"no Windows user profile with .cloud-init under {', '.join(d + '/Users' for d in drives)}")
        raise WSLError(f"several Windows user profiles have .cloud-init ({', '.join(candidates)}); "
                       "name one in datasource.WSL.user_profile")

    def _home_from_cmd(self, drives: list[str]) -> str | None:
        """``%USERPROFILE%`` from cmd.exe (run through /init, as binfmt is not ready this early)."""
        for drive in drives:
            cmd = f"{drive}/Windows/System32/cmd.exe"
            if not os.access(cmd, os.X_OK):
                continue
            out = _run(["/init", cmd, "/C", "echo %USERPROFILE%"], COMMAND_TIMEOUT)
            if not out or len(out) < 3 or out[1:3] != ":\\":
                return None
            mount = f"{os.path.dirname(drive.rstrip('/'))}/{out[0].lower()}"
            home = mount + "/" + out[3:].replace("\\", "/")
            return home if os.path.isdir(home) else None
        return None

    # -- reading
    def _load(self, inner: str) -> dict | bytes | None:
        """A data file: a YAML mapping as a dict, anything else as its bytes; None when absent."""
        import yaml

        from cloudseed.core.yaml_loading import load_yaml

        root = self.ctx.root
        if not root.isfile(inner):
            return None
        data = root.read_bytes(inner)
        try:
            loaded = load_yaml(data)
        except yaml.YAMLError:
            return data
        return loaded if isinstance(loaded, dict) else data

    def _casefold_find(self, directory: str, names: list[str]) -> str | None:
        present = {n.casefold(): n for n in self.ctx.root.listdir(directory)}
        for name in names:
            if name.casefold() in present:
                return f"{directory}/{present[name.casefold()]}"
        return None

    def _os_release(self) -> dict[str, str]:
        import shlex

        found = {}
        for line in self.ctx.root.read_text("/etc/os-release", default="").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip():
                try:
                    found[key.strip()] = " ".join(shlex.split(value))
                except ValueError:
                    found[key.strip()] = value.strip().strip("\"'")
        return found

    def fetch(self) -> bool:
        section = self.ctx.ds_cfg(self.name)
        started = time.monotonic()
        instance = self._instance_name(section)
        home = self._home(section)
        seed = f"{home}/{SEED}" if self.ctx.root.isdir(f"{home}/{SEED}") else None
        meta_data, user_data = (CLOUD.names[k] for k in ("meta_data_suffix", "user_data_suffix"))
        metadata: Any = {"instance-id": DEFAULT_INSTANCE_ID}
        if seed and instance:
            path = self._casefold_find(seed, [instance + meta_data])
            if path:
                metadata = self._load(path)
                if not isinstance(metadata, dict) or not metadata.get("instance-id"):
                    raise WSLError(f"{path} does not hold a mapping with instance-id")
        os_release = self._os_release()
        distro = os_release.get("ID", "")
        user: dict | bytes | None = None
        agent: dict | bytes | None = None
        origin = []
        if distro == "ubuntu":
            pro = f"{home}/{PRO_SEED}"
            if instance:
                user = self._load(f"{pro}/{instance}{user_data}")
                if user is not None:
                    origin.append(f"{pro}/{instance}{user_data}")
            agent_file = f"{pro}/{CLOUD.requests['agent'].path}"
            agent = self._load(agent_file)
            if agent is not None:
                origin.append(agent_file)
        if user is None and seed:
            version = os_release.get("VERSION_ID") or os_release.get("VERSION_CODENAME", "")
            names = ([instance + user_data] if instance else []) + \
                [f"{distro}-{version}{user_data}", f"{distro}-{CLOUD.names['all']}{user_data}",
                 CLOUD.names["default"] + user_data]
            path = self._casefold_find(seed, names)
            if path:
                user = self._load(path)
                origin.insert(0, path)
            else:
                LOG.warning("WSL: %s holds none of %s", seed, ", ".join(names))
        if not user and not agent:
            LOG.info("WSL: no user-data for instance %s in %s", instance, home)
            return False
        self.userdata_raw = _combine(user, agent)
        # WSL itself configures the instance's network (as cloud-init leaves it): no fallback DHCP
        self.network_config = {"config": "disabled"}
        self.metadata = dict(metadata)
        self.raw = {"meta_data": self.metadata}
        self.extra = {"instance_name": instance, "user_profile": home, "user_data_files": origin}
        self.subplatform = f"user profile ({home})"
        LOG.info("WSL: user-data from %s in %.2fs", ", ".join(origin), time.monotonic() - started)
        return True


def _combine(user: dict | bytes | None, agent: dict | bytes | None) -> bytes:
    """The user's data with the Pro agent's over it: merged cloud-config when both are mappings
    (the agent's top-level keys replace the user's), else both as parts of one MIME multipart."""
    if isinstance(user, bytes) and agent is None:
        return user
    if isinstance(agent, bytes) and user is None:
        return agent
    if isinstance(user, bytes) or isinstance(agent, bytes):
        from email.mime.multipart import MIMEMultipart
        from email.mime.nonmultipart import MIMENonMultipart

        message = MIMEMultipart()
        for part in (user, agent):
            if part is None:
                continue
            data = part if isinstance(part, bytes) else _cloud_config(part)
            leaf = MIMENonMultipart("text", "x-not-multipart")
            leaf.set_payload(data.decode("utf-8", "replace"), charset="utf-8")
            message.attach(leaf)
        return message.as_bytes()
    merged: dict = dict(user or {})
    overridden = [k for k in (agent or {}) if k in merged]
    merged.update(agent or {})
    if overridden:
        LOG.info("WSL: agent.yaml overrides %s", ", ".join(overridden))
    return _cloud_config(merged)


def _cloud_config(data: dict) -> bytes:
    import yaml

    return ("#cloud-config\n" + yaml.safe_dump(data, default_flow_style=False)).encode("utf-8")


DATASOURCE = WSL
