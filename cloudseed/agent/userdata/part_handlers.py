"""Running the ``#part-handler`` code that user-data carried (the network stage does this).

``process_userdata`` only records part-handlers; this runs them, as cloud-init does: each is
written to ``<instance dir>/handlers/part-handler-NNN.py`` (mode 0600), imported, asked for
``list_types()`` and called with ``__begin__``; every later part of one of its types that no
built-in handler took is handed to it (the most recently registered handler for a type wins);
finally each is called with ``__end__``. Handler API versions 1, 2 and 3 (what
``handle_part`` receives) and the handler's ``frequency`` attribute are honoured.

Difference from cloud-init: a part-handler cannot take over a built-in type (cloud-config,
scripts...), since those parts were already handled when user-data was processed.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from types import ModuleType
from typing import Any

from cloudseed.agent.userdata.parts import Part, ProcessedUserData

PER_INSTANCE = "once-per-instance"
PER_ALWAYS = "always"
PER_ONCE = "once"
_BEGIN, _END = "__begin__", "__end__"


def run_part_handlers(processed: ProcessedUserData, instance_dir: str, *, data: Any = None,
                      frequency: str = PER_INSTANCE) -> list[str]:
    """Run the part-handlers of ``processed``; returns the problems (each naming its handler/part)."""
    errors: list[str] = []
    if not processed.handlers:
        return errors
    handler_dir = os.path.join(instance_dir, "handlers")
    os.makedirs(handler_dir, mode=0o700, exist_ok=True)
    registered: list[tuple[Part, ModuleType, set[str]]] = []
    for handler in processed.handlers:
        try:
            module = _load(handler, handler_dir)
            types = {str(t) for t in module.list_types()}
        except Exception as e:  # user code: anything can go wrong
            errors.append(f"{handler.name}: could not be loaded: {type(e).__name__}: {e}")
            continue
        error = _call(module, data, _BEGIN, None, None, frequency, {"Content-Type": _BEGIN})
        if error:
            errors.append(f"{handler.name}: {error}")
            continue
        registered.append((handler, module, types))
    first_handler = min(h.index for h in processed.handlers)
    for part in sorted(processed.unhandled, key=lambda p: p.index):
        if part.index < first_handler:
            continue        # already reported by process_userdata: no handler existed yet
        claimant = None
        for handler, module, types in registered:
            if handler.index < part.index and part.content_type in types:
                claimant = (handler, module)
        if claimant is None:
            errors.append(f"{part.name}: no handler for content type {part.content_type}; part ignored")
            continue
        payload: str | bytes = part.content
        if part.content_type.startswith("text/"):
            payload = part.content.decode("utf-8", "surrogateescape")
        headers = dict(part.headers, **{"Content-Type": part.content_type})
        error = _call(claimant[1], data, part.content_type, part.name, payload, frequency, headers)
        if error:
            errors.append(f"{claimant[0].name} on {part.name}: {error}")
    for handler, module, _ in registered:
        error = _call(module, data, _END, None, None, frequency, {"Content-Type": _END})
        if error:
            errors.append(f"{handler.name}: {error}")
    return errors


def _load(handler: Part, handler_dir: str) -> ModuleType:
    path = os.path.join(handler_dir, f"{handler.name}.py")
    fd, tmp = tempfile.mkstemp(dir=handler_dir, prefix=".handler-")
    with os.fdopen(fd, "wb") as f:
        f.write(handler.content)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(f"cloudseed_part_handler_{handler.name[-3:]}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "handler_version"):
        module.handler_version = 1
    if not hasattr(module, "frequency"):
        module.frequency = PER_INSTANCE
    if not callable(getattr(module, "list_types", None)) or not callable(getattr(module, "handle_part", None)):
        raise TypeError("a part-handler must define list_types() and handle_part()")
    return module


def _call(module: ModuleType, data: Any, ctype: str, filename: str | None, payload: Any,
          frequency: str, headers: dict[str, str]) -> str | None:
    """Call ``handle_part`` as the handler's version wants; the error message, or None."""
    if not (module.frequency == PER_ALWAYS
            or (frequency == PER_INSTANCE and module.frequency == PER_INSTANCE)):
        return None
    try:
        version = int(module.handler_version)
    except (TypeError, ValueError):
        version = 1
    try:
        if version == 3:
            module.handle_part(data, ctype, filename, payload, frequency, headers)
        elif version == 2:
            module.handle_part(data, ctype, filename, payload, frequency)
        elif version == 1:
            module.handle_part(data, ctype, filename, payload)
        else:
            return f"unknown handler_version {version}"
    except Exception as e:  # user code
        return f"handle_part({ctype}) failed: {type(e).__name__}: {e}"
    return None
