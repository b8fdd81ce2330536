"""``process_userdata``: a user-data or vendor-data blob in, a ``ProcessedUserData`` out.

The blob is expanded into parts (``flatten``), then each part goes to its handler in order:
cloud-config parts are merged, scripts and boothooks are stored under the names cloud-init
would give them, templates are rendered and handled as what they render to, part-handlers are
recorded (never run here: ``part_handlers.run_part_handlers`` runs them later). Nothing here
executes user code, and nothing raises for bad input: every problem is an entry in ``errors``
naming the part.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Union

from cloudseed.agent.userdata.cloud_config_parts import CloudConfigMerge
from cloudseed.agent.userdata.flatten import Flattener, RawPart
from cloudseed.agent.userdata.kept_yaml import KeptYaml
from cloudseed.agent.userdata.parts import (
    BOOTHOOK,
    CLOUD_CONFIG,
    CLOUD_CONFIG_JSONP,
    JINJA,
    NOT_MULTIPART,
    PART_HANDLER,
    SHELLSCRIPT,
    SHELLSCRIPT_BY_FREQUENCY,
    Part,
    ProcessedUserData,
    content_type_from_start,
)

Blob = Union[bytes, str, None]
_FILENAME_ALLOWED = frozenset("_-.()0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_BOOTHOOK_PREFIX = "#cloud-boothook"
_MARKER_LIKE = re.compile(r"^#[A-Za-z][A-Za-z0-9_-]{0,30}$")


def process_userdata(
    blob: Blob | list[Blob],
    *,
    instance_data: dict | None = None,
    include_cache_dir: str | None = None,
    fetch_timeout: float = 10.0,
    allow_includes: bool = True,
    fetch_retries: int = 2,
    excluded_types: Iterable[str] = (),
    launch_index: int | None = None,
    root=None,
    kept_yaml: KeptYaml | None = None,
) -> ProcessedUserData:
    """Process user-data (or vendor-data: the same formats) without running any of it.

    ``instance_data`` is what ``## template: jinja`` parts are rendered with,
    ``include_cache_dir`` where ``#include-once`` content is kept, ``excluded_types`` content
    types to ignore (vendor-data's ``disabled_handlers``), ``launch_index`` drops parts
    addressed to another launch index, ``root`` is the target root ``file://`` includes are read
    in (None: this host, for ``cloudseed userdata show``), ``kept_yaml`` the cloud-config documents
    parsed at an earlier boot of the instance. A list of blobs is processed as one.
    """
    result = ProcessedUserData()
    try:
        flattener = Flattener(result.errors, allow_includes=allow_includes, fetch_timeout=fetch_timeout,
                              fetch_retries=fetch_retries, include_cache_dir=include_cache_dir, root=root)
        for one in blob if isinstance(blob, list) else [blob]:
            flattener.add_blob(_as_bytes(one))
        _Dispatcher(result, instance_data, set(excluded_types), launch_index, kept_yaml).run(flattener.parts)
    except Exception as e:  # the boot must go on whatever the blob holds
        result.errors.append(f"user-data: processing stopped by an unexpected error: "
                             f"{type(e).__name__}: {e}")
    return result


def _as_bytes(blob: Blob) -> bytes:
    if blob is None:
        return b""
    if isinstance(blob, str):
        return blob.encode("utf-8", "surrogateescape")
    return bytes(blob)


def clean_filename(name: str) -> str:
    """A part name made safe as a file name: ``/`` becomes ``_``, other unsafe characters go."""
    return "".join(c for c in name.replace("/", "_") if c in _FILENAME_ALLOWED).strip()


def dos2unix(text: str) -> str:
    """CRLF -> LF, when the first line ends in CRLF (cloud-init's rule)."""
    end = text.find("\n")
    if end <= 0 or text[end - 1] != "\r":
        return text
    return text.replace("\r\n", "\n")


class _Dispatcher:
    def __init__(self, result: ProcessedUserData, instance_data: dict | None, excluded: set[str],
                 launch_index: int | None, kept_yaml: KeptYaml | None = None):
        self.result = result
        self.instance_data = instance_data
        self.excluded = excluded
        self.launch_index = launch_index
        self.cloud_config = CloudConfigMerge(result.errors, kept_yaml)
        self.seen_part_handler = False

    def run(self, parts: list[RawPart]) -> None:
        for index, part in enumerate(parts):
            if part.content_type in self.excluded:
                continue
            if self.launch_index is not None and part.launch_index not in (None, self.launch_index):
                continue
            self._handle(index, part)
        self.result.cloud_config = self.cloud_config.config
        self.result.cloud_config_sources = list(self.cloud_config.sources)

    def _handle(self, index: int, part: RawPart) -> None:
        ctype = part.content_type
        if ctype == PART_HANDLER:
            name = f"part-handler-{len(self.result.handlers):03d}"
            self.result.handlers.append(self._part(index, part, name, part.text()))
            self.seen_part_handler = True
        elif ctype == CLOUD_CONFIG:
            self.cloud_config.add_yaml(part.text(), part.name, part.label, part.headers)
        elif ctype == CLOUD_CONFIG_JSONP:
            self.cloud_config.add_json_patch(part.text(), part.name, part.label)
        elif ctype == SHELLSCRIPT:
            self._store(self.result.scripts, index, part, clean_filename(part.name), dos2unix(part.text()))
        elif ctype in SHELLSCRIPT_BY_FREQUENCY:
            frequency = SHELLSCRIPT_BY_FREQUENCY[ctype]
            name = clean_filename(os.path.basename(part.name))
            self._store(self.result.scripts_per_freq[frequency], index, part, name, dos2unix(part.text()))
        elif ctype == BOOTHOOK:
            text = dos2unix(part.text())
            if text.startswith(_BOOTHOOK_PREFIX):
                text = text[len(_BOOTHOOK_PREFIX):]
            self._store(self.result.boothooks, index, part, clean_filename(part.name), text.lstrip())
        elif ctype == JINJA:
            self._template(index, part)
        elif part.payload:
            self.result.unhandled.append(self._part(index, part, part.name, part.text()))
            if not self.seen_part_handler:
                self.result.errors.append(self._unknown_message(part))

    def _template(self, index: int, part: RawPart) -> None:
        from cloudseed.agent.userdata.jinja_parts import TemplateError, render_template_part

        try:
            rendered, problems = render_template_part(part.text(), self.instance_data)
        except TemplateError as e:
            self.result.errors.append(f"{part.label}: {e}; part ignored")
            return
        self.result.errors.extend(f"{part.label}: {p}" for p in problems)
        if rendered is None:
            return
        rendered_type = content_type_from_start(rendered)
        if rendered_type in (CLOUD_CONFIG, CLOUD_CONFIG_JSONP):
            # As in cloud-init, a rendered template is merged as YAML even if it says jsonp.
            self.cloud_config.add_yaml(rendered, part.name, part.label, part.headers)
        elif rendered_type == SHELLSCRIPT:
            self._store(self.result.scripts, index, part, clean_filename(part.name), dos2unix(rendered))
        else:
            what = rendered_type or "content of no known type"
            self.result.errors.append(f"{part.label}: the template rendered to {what}; only "
                                      "#cloud-config and #! scripts can be templates; part ignored")

    def _store(self, into: list[Part], index: int, part: RawPart, name: str, text: str) -> None:
        if not name:
            self.result.errors.append(f"{part.label}: its name has no usable characters for a file "
                                      "name; part ignored")
            return
        stored = self._part(index, part, name, text)
        for position, existing in enumerate(into):
            if existing.name == name:
                self.result.errors.append(f"{part.label}: replaces the earlier part named {name!r} "
                                          "(two parts with the same name)")
                into[position] = stored
                return
        into.append(stored)

    @staticmethod
    def _part(index: int, part: RawPart, name: str, text: str) -> Part:
        return Part(name=name, content=text.encode("utf-8", "surrogateescape"),
                    content_type=part.content_type, filename=part.filename, index=index,
                    headers=dict(part.headers), launch_index=part.launch_index)

    @staticmethod
    def _unknown_message(part: RawPart) -> str:
        text = part.text()
        start = text[:40].split("\n", 1)[0].rstrip("\r")
        if any(0xDC80 <= ord(c) <= 0xDCFF or (ord(c) < 32 and c not in "\t\r") for c in start):
            start_repr = "binary data"
        elif _MARKER_LIKE.match(start):   # a mistyped format marker, safe to show
            start_repr = f"it starts with {start!r}"
        else:   # user data may hold secrets: its text never goes to the status
            start_repr = "its first line is no format marker"
        if part.content_type == NOT_MULTIPART:
            return (f"{part.label}: not a known user-data format ({start_repr}); expected #cloud-config, "
                    "#!, #include, #cloud-boothook, MIME multipart, ... ; part ignored")
        return f"{part.label}: no handler for content type {part.content_type} ({start_repr}); part ignored"
