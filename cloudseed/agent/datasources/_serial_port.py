"""Bounded line I/O on a serial port or Unix socket, shared by the SmartOS and CloudSigma datasources.

A metadata host on the other end of ``/dev/ttyS1`` may never answer, answer garbage, or stop mid-line:
every read here has a deadline (``SerialTimeout`` says what was received so far), every line a size
limit. A tty is put in raw mode (no echo, no newline translation) and locked exclusively, as
cloud-init's pyserial use does; standard library only (os, select, termios, fcntl).
"""

from __future__ import annotations

import os
import select
import time

MAX_LINE = 4 * 1024 * 1024


class SerialError(Exception):
    """The port could not be used or gave no usable answer; the message names the port and why."""


class SerialTimeout(SerialError):
    """Nothing (or no complete line) arrived in time."""


class SerialPort:
    """An open serial device (or a connected Unix socket) read and written with deadlines."""

    def __init__(self, fd: int, name: str):
        self.fd = fd
        self.name = name
        self._pending = b""

    @classmethod
    def open(cls, path: str, timeout: float) -> SerialPort:
        """Open ``path``: a character device (raw mode, exclusive lock) or a Unix stream socket."""
        import stat

        try:
            mode = os.stat(path).st_mode
        except OSError as e:
            raise SerialError(f"{path}: {e.strerror}") from None
        if stat.S_ISSOCK(mode):
            return cls._open_socket(path, timeout)
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError as e:
            raise SerialError(f"cannot open {path}: {e.strerror}") from None
        try:
            if os.isatty(fd):
                _raw(fd)
            _lock(fd, path, time.monotonic() + timeout)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, path)

    @classmethod
    def _open_socket(cls, path: str, timeout: float) -> SerialPort:
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            if len(path.encode()) < 100:
                sock.connect(path)
            else:  # a deep target root: reach the socket through its directory's descriptor
                fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
                try:
                    sock.connect(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
                finally:
                    os.close(fd)
        except OSError as e:
            sock.close()
            raise SerialError(f"cannot connect to {path}: {e}") from None
        sock.setblocking(False)
        return cls(sock.detach(), path)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SerialPort:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SerialTimeout(f"{self.name}: could not write {len(data)} bytes in time "
                                    f"({len(data) - len(view)} written)")
            _, writable, _ = select.select([], [self.fd], [], left)
            if not writable:
                continue
            try:
                view = view[os.write(self.fd, view):]
            except BlockingIOError:
                continue
            except OSError as e:
                raise SerialError(f"{self.name}: write failed: {e.strerror}") from None

    def _fill(self, deadline: float) -> bool:
        """Read what is there (waiting until ``deadline``); False when nothing came in time."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        readable, _, _ = select.select([self.fd], [], [], left)
        if not readable:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return True
        except OSError as e:  # a pty whose other end closed: EIO
            raise SerialError(f"{self.name}: read failed: {e.strerror}") from None
        if not chunk:
            raise SerialError(f"{self.name}: closed by the other end"
                              + (f" after {self._pending[:80]!r}" if self._pending else ""))
        self._pending += chunk
        return True

    def read_until(self, ends: bytes, deadline: float, max_bytes: int = MAX_LINE) -> bytes:
        """Bytes up to (without) the first byte that is one of ``ends``; SerialTimeout at ``deadline``."""
        while True:
            cut = min((i for i in (self._pending.find(bytes([e])) for e in ends) if i >= 0), default=-1)
            if cut >= 0:
                line, self._pending = self._pending[:cut], self._pending[cut + 1:]
                return line
            if len(self._pending) > max_bytes:
                raise SerialError(f"{self.name}: a line longer than {max_bytes} bytes")
            if not self._fill(deadline):
                partial = self._pending[:120]
                raise SerialTimeout(f"{self.name}: no complete line in time"
                                    + (f" (partial: {partial!r})" if partial else " (nothing received)"))

    def readline(self, deadline: float, max_bytes: int = MAX_LINE) -> bytes:
        return self.read_until(b"\n", deadline, max_bytes)

    def discard_input(self, quiet: float = 0.1, deadline: float | None = None) -> bytes:
        """Drop what is pending until the port is quiet for ``quiet`` seconds (bounded by ``deadline``)."""
        dropped = self._pending
        self._pending = b""
        end = deadline if deadline is not None else time.monotonic() + 2.0
        while time.monotonic() < end and self._fill(min(end, time.monotonic() + quiet)):
            dropped += self._pending
            self._pending = b""
        return dropped


def _raw(fd: int) -> None:
    import termios

    attrs = termios.tcgetattr(fd)
    attrs[0] &= ~(termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP | termios.INLCR
                  | termios.IGNCR | termios.ICRNL | termios.IXON | termios.IXOFF)
    attrs[1] &= ~termios.OPOST
    attrs[2] = (attrs[2] & ~(termios.CSIZE | termios.PARENB)) | termios.CS8 | termios.CLOCAL | termios.CREAD
    attrs[3] &= ~(termios.ECHO | termios.ECHONL | termios.ICANON | termios.ISIG | termios.IEXTEN)
    attrs[6][termios.VMIN] = 0
    attrs[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSANOW, attrs)


def _lock(fd: int, path: str, deadline: float) -> None:
    import fcntl

    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            if time.monotonic() >= deadline:
                raise SerialError(f"{path} is locked by another process") from None
            time.sleep(0.05)
