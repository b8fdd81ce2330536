"""seed_random: add entropy from the config and the metadata to the kernel pool, run a seeding command.

``random_seed: {file: /dev/urandom, data: ..., encoding: raw|b64|gzip|gz+b64, command: [...],
command_required: bool}``; the metadata's ``random_seed`` (OpenStack) is added too. A character
device is written in place (it cannot be replaced by rename); a regular file is appended to.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import os
import stat

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError
from cloudseed.core.values import as_bool

MODULE = ModuleSpec(
    name="seed_random", stage=STAGE_INIT,
    title="Seed the kernel's random number generator",
    schema={"properties": {"random_seed": {"type": "object", "properties": {
        "file": {"type": "string"}, "data": {"type": "string"},
        "encoding": {"type": "string", "enum": ["raw", "base64", "b64", "gzip", "gz", "gz+b64", "gzip+base64"]},
        "command": {"type": "array", "items": {"type": "string"}},
        "command_required": {"type": "boolean"},
    }, "additionalProperties": False}}},
    examples=(
        """\
#cloud-config
# Add data of your own to the kernel's entropy pool (base64 here).
random_seed:
  file: /dev/urandom
  data: q83vASNFZ4mrze8BI0VniQ==
  encoding: base64
""",
        """\
#cloud-config
# Also run a command; $RANDOM_SEED_FILE in its environment names the file.
random_seed:
  command: [sh, -c, "head -c 64 /dev/hwrng > $RANDOM_SEED_FILE"]
  command_required: false
""",
    ),
)


def decode(data: str | bytes, encoding: str | None) -> bytes:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    enc = (encoding or "raw").lower()
    try:
        if "b64" in enc or "base64" in enc:
            raw = base64.b64decode(raw)
        if enc.startswith("gz"):
            raw = gzip.decompress(raw)
    except (binascii.Error, ValueError, OSError, EOFError) as e:
        raise ModuleError(f"random_seed.data: cannot decode as {enc}: {e}") from None
    if enc not in ("raw", "base64", "b64", "gzip", "gz", "gz+b64", "gzip+base64", "gzip+b64", "gz+base64"):
        raise ModuleError(f"random_seed.encoding: unknown encoding {encoding!r}")
    return raw


def handle(ctx: ModuleContext) -> None:
    settings = ctx.cfg.get("random_seed") or {}
    if not isinstance(settings, dict):
        raise ModuleError("random_seed: expected a mapping")
    seed = b""
    if settings.get("data"):
        seed += decode(settings["data"], settings.get("encoding"))
    metadata = getattr(ctx.datasource, "metadata", None) or {}
    if metadata.get("random_seed"):
        seed += str(metadata["random_seed"]).encode("utf-8")
    target = str(settings.get("file") or "/dev/urandom")
    if seed:
        host = ctx.root.path(target)
        try:
            mode = os.stat(host).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISCHR(mode):
            with open(host, "ab", buffering=0) as device:
                device.write(seed)
        elif target.startswith("/dev/"):
            ctx.log.info("%s is not a device in this root; seed not written", target)
        else:
            ctx.root.write(target, seed, mode=0o600, append=True)
        ctx.log.info("added %d bytes of seed to %s", len(seed), target)
    command = settings.get("command")
    required = as_bool(settings.get("command_required"), False)
    if not command:
        if required:
            raise ModuleError("random_seed.command: command_required is true but no command is given")
        return
    argv = [command] if isinstance(command, str) else [str(c) for c in command]
    if ctx.root.which(argv[0]) is None and not argv[0].startswith("/"):
        if required:
            raise ModuleError(f"random_seed.command: {argv[0]} is not installed (command_required is true)")
        ctx.log.info("seed command %s not installed; skipped", argv[0])
        return
    try:
        ctx.root.run(argv, env=dict(os.environ, RANDOM_SEED_FILE=target), timeout=60)
    except CommandError as e:
        raise ModuleError(f"random_seed.command: {e}") from None
