"""The target-root layer: every file and command operation of the agent goes through here.

A ``TargetRoot`` is pointed at ``/`` in production and at any directory with ``--root DIR``
(tests, offline image customisation). Paths given to it are always paths *inside* the
target system ("/etc/hostname"); they are resolved without ever following a symlink out of
the root. Writes are atomic (temporary file + rename in the same directory) and set mode and
owner explicitly. Commands run chrooted into the root when it is not ``/``; the few that act on
the running machine itself (its devices, its network) go through ``run_on_machine`` here too, so no
other agent file starts a process (``tests/architecture/test_commands.py``).
"""

from __future__ import annotations

import errno
import os
import stat

# subprocess (with signal, selectors, threading, locale) is imported where a command runs: the boot's
# local stage of an unchanged instance starts none, and it runs while udev's coldplug does
TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    import subprocess
    from typing import Any, Mapping, Sequence, Union

    Content = Union[str, bytes]


_MAX_SYMLINKS = 40


class RootError(Exception):
    """A path or command could not be handled inside the target root."""


class CommandError(RootError):
    """A command run inside the target root failed."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        detail = (stderr or stdout).strip().splitlines()
        tail = detail[-1] if detail else ""
        super().__init__(f"command {self.argv[0]!r} exited {returncode}" + (f": {tail}" if tail else ""))


_PID_NS: dict[int, str] = {}  # this process's PID namespace (by PID: a fork has its own answer)


def writer_tag() -> str:
    """What a temporary name carries to say whose it is: the PID and its PID namespace.

    Two agents that are PID 1 in their own containers, writing the same root, get different names
    (the namespace's inode number tells them apart); "0" where ``/proc`` is not there.
    """
    pid = os.getpid()
    ns = _PID_NS.get(pid)
    if ns is None:
        try:
            ns = os.readlink("/proc/self/ns/pid").partition("[")[2].rstrip("]") or "0"
        except OSError:
            ns = "0"
        _PID_NS.clear()
        _PID_NS[pid] = ns
    return f"{pid}-{ns}"


def _remove_stale_temporaries(directory: str, prefix: str = ".") -> None:
    """Remove what a killed writer of the same file left (``.NAME.cloudseed-PID-PIDNS.tmp``).

    In this PID namespace: a temporary of this process (a PID reused after a reboot) or of a
    process that is no longer its writer (``_writer_alive``) is stale; a live writer's stays.
    Another namespace's PIDs mean nothing here: its temporary is stale when no writer holds its
    lock (every writer locks its temporary while it writes) and it is not brand new.
    """
    try:
        names = [n for n in os.listdir(directory)
                 if n.startswith(prefix) and n.endswith(".tmp") and ".cloudseed-" in n]
    except OSError:
        return
    mine = writer_tag()
    my_ns = mine.partition("-")[2]
    for name in names:
        pid, _, ns = name[:-4].rpartition(".cloudseed-")[2].partition("-")
        if not pid.isdigit():
            continue
        host = os.path.join(directory, name)
        if ns and ns != my_ns:
            if not _unlocked_and_old(host):
                continue
        elif int(pid) != os.getpid() and _writer_alive(int(pid), host):
            continue
        try:
            os.unlink(host)
        except OSError:
            pass


def _writer_alive(pid: int, host: str) -> bool:
    """Whether process ``pid`` of this namespace may still be writing ``host``.

    A live PID is not always the writer: a killed one not yet reaped (a zombie), a process started
    after the temporary was last written (the PID reused, after a reboot or a wrap-around), or one
    that has held no lock on it for seconds (a writer locks its temporary from the start).
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                        # alive, someone else's: the checks below still apply
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(") ")[2].split()
        if fields[0] in ("Z", "X"):
            return False
        started = _boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")
        if started > os.lstat(host).st_mtime + 1:
            return False
    except (OSError, IndexError, ValueError):
        pass                        # no /proc: trust the PID
    return not _unlocked_and_old(host)


def _boot_time() -> float:
    """When this kernel booted, in seconds since the epoch (``btime`` of ``/proc/stat``)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def _unlocked_and_old(host: str) -> bool:
    """No writer holds a lock on ``host`` and it is more than a few seconds old."""
    import fcntl
    import time

    try:
        fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if time.time() - os.fstat(fd).st_mtime < 5:
            return False            # a writer between its create and its lock, perhaps
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False                # a live writer holds it
    finally:
        os.close(fd)


def _lock_temporary(fd: int) -> None:
    """Hold a lock on a temporary while it is written: a writer in another PID namespace sees it is live."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass  # a file system without locks: the name alone tells writers apart
# the target's standard PATH (``which``)
PATH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

# background commands started in a root other than "/": a run on a mounted image must not end
# while one of them still holds it (``wait_for_offline_children``)
_OFFLINE_CHILDREN: list[tuple[str, subprocess.Popen]] = []


def wait_for_offline_children(timeout: float = 120.0) -> list[str]:
    """Wait (at most ``timeout`` s in all) for the background commands started in offline roots;
    any still running then is killed. Returns one line per command waited for or killed."""
    import subprocess
    import time

    said = []
    deadline = time.monotonic() + timeout
    while _OFFLINE_CHILDREN:
        top, proc = _OFFLINE_CHILDREN.pop(0)
        if proc.poll() is not None:
            continue
        started = time.monotonic()
        try:
            proc.wait(timeout=max(0.0, deadline - started))
            said.append(f"waited {time.monotonic() - started:.1f}s for {proc.args[0]} (pid {proc.pid}) in {top}")
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, 9)      # its own session: the command and what it started
            except OSError:
                proc.kill()
            proc.wait()
            said.append(f"killed {proc.args[0]} (pid {proc.pid}) in {top}: still running after {timeout:.0f}s")
    return said


def run_on_machine(argv: Sequence[str], *, input: Content | None = None, timeout: float = 30.0,
                   env: Mapping[str, str] | None = None, text: bool = True) -> subprocess.CompletedProcess:
    """Run ``argv`` on the running machine itself, never chrooted, and wait for it.

    For what exists only there, whatever the target root: its block devices (``blkid``,
    ``mount``), its network interfaces (``ip``), its kernel (``modprobe``), a host tool doing work
    for an offline root (``ssh-keygen``). Never raises for the command: one that cannot start
    returns 127 and one still running after ``timeout`` seconds is killed and returns 124, each
    with the reason as its stderr. Output is captured (text with ``errors=replace`` unless ``text``
    is false).
    """
    import subprocess

    data = input.encode("utf-8") if isinstance(input, str) else input
    try:
        proc = subprocess.run(list(argv), input=data, stdin=None if data is not None else subprocess.DEVNULL,
                              capture_output=True, timeout=timeout, env=None if env is None else dict(env))
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired:
        out, err, code = b"", f"{argv[0]}: did not finish in {timeout:g}s".encode(), 124
    except OSError as e:
        out, err, code = b"", f"{argv[0]}: {e.strerror or e}".encode(), 127
    if text:
        return subprocess.CompletedProcess(list(argv), code, out.decode("utf-8", "replace"),
                                           err.decode("utf-8", "replace"))
    return subprocess.CompletedProcess(list(argv), code, out, err)


class TargetRoot:
    """File and command operations confined to one root directory."""

    def __init__(self, path: str = "/"):
        self.top = os.path.realpath(path)

    def __repr__(self) -> str:
        return f"TargetRoot({self.top!r})"

    @property
    def is_live(self) -> bool:
        """True when this root is the running system (commands act on the live machine)."""
        return self.top == "/"

    # ----------------------------------------------------------------- path resolution
    def path(self, inner: str) -> str:
        """Host path for ``inner``, resolving symlinks as if ``top`` were ``/``.

        The last component is resolved too (so reads follow a link that stays inside the root).
        A link pointing outside is re-rooted, never followed out.
        """
        return self._resolve(inner, follow_last=True)

    def path_nofollow(self, inner: str) -> str:
        """Host path for ``inner`` with every parent resolved but the last component kept as is."""
        return self._resolve(inner, follow_last=False)

    def _resolve(self, inner: str, follow_last: bool) -> str:
        if self.is_live:
            # nothing leads out of "/": the kernel follows links itself, as the walk below would,
            # without an lstat per component (costly in an emulated boot)
            return os.path.normpath("/" + inner.lstrip("/"))
        parts = [p for p in inner.split("/") if p not in ("", ".")]
        resolved: list[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = os.path.join(self.top, *resolved, part)
            is_last = not parts
            if (follow_last or not is_last) and os.path.islink(candidate):
                hops += 1
                if hops > _MAX_SYMLINKS:
                    raise RootError(f"too many levels of symbolic links resolving {inner}")
                target = os.readlink(candidate)
                if target.startswith("/"):
                    resolved = []
                parts = [p for p in target.split("/") if p not in ("", ".")] + parts
                continue
            resolved.append(part)
        return os.path.join(self.top, *resolved)

    def inner(self, host_path: str) -> str:
        """The path inside the root for a host path under ``top``."""
        if self.is_live:
            return host_path
        rel = os.path.relpath(host_path, self.top)
        return "/" if rel == "." else "/" + rel

    # ----------------------------------------------------------------- reading
    def exists(self, inner: str) -> bool:
        return os.path.lexists(self.path(inner))

    def isdir(self, inner: str) -> bool:
        return os.path.isdir(self.path(inner))

    def isfile(self, inner: str) -> bool:
        return os.path.isfile(self.path(inner))

    def islink(self, inner: str) -> bool:
        return os.path.islink(self.path_nofollow(inner))

    def listdir(self, inner: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(inner)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read_bytes(self, inner: str) -> bytes:
        with open(self.path(inner), "rb") as f:
            return f.read()

    def read_text(self, inner: str, default: str | None = None) -> str:
        try:
            return self.read_bytes(inner).decode("utf-8", errors="replace")
        except FileNotFoundError:
            if default is not None:
                return default
            raise

    def stat(self, inner: str) -> os.stat_result:
        return os.stat(self.path(inner))

    # ----------------------------------------------------------------- owners
    def lookup_uid(self, user: str | int | None) -> int:
        """uid of ``user`` as the target's /etc/passwd knows it (-1 for None: leave as is)."""
        if user is None or user == "":
            return -1
        if isinstance(user, int) or str(user).isdigit():
            return int(user)
        for fields in self._db("/etc/passwd"):
            if fields[0] == user and len(fields) > 2:
                return int(fields[2])
        raise RootError(f"unknown user {user!r} in {self.top}/etc/passwd")

    def lookup_gid(self, group: str | int | None) -> int:
        if group is None or group == "":
            return -1
        if isinstance(group, int) or str(group).isdigit():
            return int(group)
        for fields in self._db("/etc/group"):
            if fields[0] == group and len(fields) > 2:
                return int(fields[2])
        raise RootError(f"unknown group {group!r} in {self.top}/etc/group")

    def user_entry(self, user: str) -> list[str] | None:
        """The /etc/passwd fields of ``user`` in the target, or None."""
        for fields in self._db("/etc/passwd"):
            if fields[0] == user:
                return fields
        return None

    def _db(self, inner: str) -> list[list[str]]:
        text = self.read_text(inner, default="")
        return [line.split(":") for line in text.splitlines() if line and not line.startswith("#")]

    def chown(self, inner: str, owner: str | int | None = None, group: str | int | None = None) -> None:
        uid, gid = self.lookup_uid(owner), self.lookup_gid(group)
        if uid != -1 or gid != -1:
            os.chown(self.path_nofollow(inner), uid, gid, follow_symlinks=False)

    def chmod(self, inner: str, mode: int) -> None:
        os.chmod(self.path(inner), mode)

    # ----------------------------------------------------------------- writing
    def makedirs(self, inner: str, mode: int = 0o755, owner: str | int | None = None,
                 group: str | int | None = None) -> str:
        """Create ``inner`` and missing parents; mode/owner apply to directories created here."""
        host = self.path(inner)
        if os.path.isdir(host):
            return host
        # ``host`` is fully resolved inside the root: only its missing tail is created here
        try:
            os.makedirs(host, 0o755)
        except FileExistsError:
            if not os.path.isdir(host):
                raise RootError(f"{inner} exists and is not a directory") from None
            return host
        except NotADirectoryError:
            raise RootError(f"cannot create {inner}: a parent is not a directory") from None
        except OSError as e:  # named as the target sees it
            failed = self.inner(e.filename) if isinstance(e.filename, str) and e.filename.startswith(self.top) \
                else inner
            raise OSError(e.errno, e.strerror, failed) from None
        os.chmod(host, mode)
        self.chown(inner, owner, group)
        return host

    def write(self, inner: str, content: Content, mode: int = 0o644,
              owner: str | int | None = None, group: str | int | None = None,
              append: bool = False, keep_mode: bool = False) -> str:
        """Atomically write ``content`` to ``inner`` with the given mode and owner.

        ``append`` adds to the existing content (still atomically: the whole new file is
        written beside the old and renamed over it). ``keep_mode`` keeps the mode and owner of
        an existing file instead of applying ``mode``/``owner``.
        """
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        parent = os.path.dirname(inner.rstrip("/")) or "/"
        # The last component is not followed: a link there is replaced, never written through.
        host = self.path_nofollow(inner)
        existing: os.stat_result | None = None
        try:
            existing = os.lstat(host)
        except (FileNotFoundError, NotADirectoryError):
            pass
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            raise RootError(f"cannot write {inner}: it is a directory")
        if keep_mode and existing is not None and stat.S_ISREG(existing.st_mode):
            mode = stat.S_IMODE(existing.st_mode)
            uid, gid = existing.st_uid, existing.st_gid
        else:
            # an unknown owner fails the write before anything is made (not even the directory: a
            # home made here for a user who does not exist yet would stay root's when useradd comes)
            uid, gid = self.lookup_uid(owner), self.lookup_gid(group)
        if existing is None:
            self.makedirs(parent)
            host = self.path_nofollow(inner)  # resolved again now that the directories exist
        if append and existing is not None and stat.S_ISREG(existing.st_mode):
            with open(host, "rb") as f:
                data = f.read() + data
        directory = os.path.dirname(host)
        prefix = f".{os.path.basename(host)}.cloudseed-"
        tmp = os.path.join(directory, f"{prefix}{writer_tag()}.tmp")
        _remove_stale_temporaries(directory, prefix)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:  # the error names the file being written, never the temporary one
            raise OSError(e.errno, e.strerror, inner) from None
        try:
            with os.fdopen(fd, "wb") as f:
                _lock_temporary(f.fileno())
                f.write(data)
                f.flush()
                if uid != -1 or gid != -1:
                    os.fchown(f.fileno(), uid, gid)
                os.fchmod(f.fileno(), mode)
                os.fsync(f.fileno())
            os.rename(tmp, host)
        except BaseException as e:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            if isinstance(e, OSError):
                raise OSError(e.errno, e.strerror, inner) from None
            raise
        return host

    def remove_stale_temporaries(self, inner: str) -> None:
        """Remove what killed writers left in directory ``inner`` (a file not written again keeps its own)."""
        _remove_stale_temporaries(self.path(inner))

    def remove(self, inner: str) -> bool:
        """Remove a file or link; True when something was removed."""
        try:
            os.unlink(self.path_nofollow(inner))
            return True
        except FileNotFoundError:
            return False
        except IsADirectoryError:
            raise RootError(f"cannot remove {inner}: it is a directory") from None

    def remove_tree(self, inner: str) -> None:
        host = self.path_nofollow(inner)
        if os.path.islink(host) or os.path.isfile(host):
            os.unlink(host)
        elif os.path.isdir(host):
            import shutil  # only for a directory: at boot the gate's usually is not there (a fresh /run)

            shutil.rmtree(host)

    def symlink(self, target: str, inner: str) -> None:
        """Atomically point the link ``inner`` at ``target`` (a path as the target system sees it)."""
        parent = os.path.dirname(inner.rstrip("/")) or "/"
        self.makedirs(parent)
        host = self.path_nofollow(inner)
        tmp = f"{host}.cloudseed-{writer_tag()}.lnk"
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        try:
            os.symlink(target, tmp)
        except OSError as e:
            raise OSError(e.errno, e.strerror, inner) from None
        try:
            os.rename(tmp, host)
        except OSError as e:
            os.unlink(tmp)
            if e.errno in (errno.EISDIR, errno.ENOTEMPTY):
                raise RootError(f"cannot replace directory {inner} with a link") from None
            raise OSError(e.errno, e.strerror, inner) from None

    # ----------------------------------------------------------------- commands
    def run(self, argv: Sequence[str], *, input: Content | None = None,
            env: Mapping[str, str] | None = None, check: bool = True,
            timeout: float | None = None, capture: bool = True,
            cwd: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` on the target system: chrooted into ``top`` when it is not ``/``.

        Output is captured as text (``errors=replace``). With ``check`` a non-zero exit
        raises ``CommandError`` carrying the output.
        """
        import subprocess

        run_env = dict(os.environ if env is None else env)
        run_env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        if isinstance(input, str):
            input = input.encode("utf-8")

        def enter_root() -> None:
            if not self.is_live:
                os.chroot(self.top)
            os.chdir(cwd or "/")

        try:
            proc = subprocess.run(
                list(argv), input=input, env=run_env, timeout=timeout,
                stdout=subprocess.PIPE if capture else None,
                stderr=subprocess.PIPE if capture else None,
                preexec_fn=None if (self.is_live and cwd is None) else enter_root,
            )
        except FileNotFoundError:
            program = argv[0]
            if "/" in program and os.path.isfile(self.path(program)):
                reason = f"{program}: its interpreter (the #! line) does not exist on the target"
            else:
                reason = f"{program}: command not found on the target"
            raise CommandError(argv, 127, "", reason) from None
        except PermissionError:
            raise CommandError(argv, 126, "", f"{argv[0]}: not executable") from None
        except subprocess.SubprocessError as e:
            if isinstance(e, subprocess.TimeoutExpired):
                raise CommandError(argv, 124, "", f"timed out after {timeout}s") from None
            raise
        out = (proc.stdout or b"").decode("utf-8", errors="replace")
        err = (proc.stderr or b"").decode("utf-8", errors="replace")
        result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        if check and proc.returncode != 0:
            raise CommandError(argv, proc.returncode, out, err)
        return result

    def _popen(self, argv: Sequence[str], env: Mapping[str, str] | None, **streams: Any) -> subprocess.Popen:
        """``argv`` started on the target (chrooted unless this is the live root), cwd ``/``, with
        the standard PATH when ``env`` has none; ``streams`` are Popen's stdio and session options."""
        import subprocess

        run_env = dict(os.environ if env is None else env)
        run_env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")

        def enter_root() -> None:
            os.chroot(self.top)
            os.chdir("/")

        # on the live root no preexec function: without one Python starts the child with vfork,
        # much cheaper than a fork of this process in an emulated boot
        return subprocess.Popen(list(argv), env=run_env, cwd="/", preexec_fn=None if self.is_live else enter_root,
                                **streams)

    def spawn(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.Popen:
        """Start ``argv`` on the target in the background, detached: it outlives this process.

        On a root other than ``/`` the command is remembered: ``wait_for_offline_children`` waits
        for it before the run ends, so nothing holds a mounted image afterwards."""
        import subprocess

        proc = self._popen(argv, env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
        if not self.is_live:
            _OFFLINE_CHILDREN.append((self.top, proc))
        return proc

    def pipe(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.Popen:
        """Start ``argv`` on the target reading its stdin from a pipe (``.stdin``); its own output
        goes where this process's goes. It ends when the pipe is closed."""
        import subprocess

        return self._popen(argv, env, stdin=subprocess.PIPE)

    def start(self, argv: Sequence[str]) -> subprocess.Popen:
        """Start ``argv`` on the target as this process's child, for a later wait: its standard error
        (a pipe, read by ``communicate``) tells why it failed; its standard output is dropped."""
        import subprocess

        try:
            return self._popen(argv, None, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        except FileNotFoundError:
            raise CommandError(argv, 127, "", f"{argv[0]}: command not found on the target") from None

    def which(self, name: str) -> str | None:
        """Path (inside the root) of an executable ``name`` on the target's standard PATH."""
        for d in PATH_DIRS:
            candidate = f"{d}/{name}"
            host = self.path(candidate)
            if os.path.isfile(host) and os.access(host, os.X_OK):
                return candidate
        return None
