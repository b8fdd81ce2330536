"""What processed user-data is made of: parts, the result object and the content types.

A blob of user-data (or vendor-data) becomes a flat list of parts; each part has a content type
that decides what happens to it (cloud-config merged, script stored for the final stage, ...).
The content types and the ``#`` prefixes that imply them are cloud-init's documented ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CLOUD_CONFIG = "text/cloud-config"
CLOUD_CONFIG_JSONP = "text/cloud-config-jsonp"
CLOUD_CONFIG_ARCHIVE = "text/cloud-config-archive"
SHELLSCRIPT = "text/x-shellscript"
BOOTHOOK = "text/cloud-boothook"
PART_HANDLER = "text/part-handler"
JINJA = "text/jinja2"
INCLUDE = "text/x-include-url"
INCLUDE_ONCE = "text/x-include-once-url"
NOT_MULTIPART = "text/x-not-multipart"
PLAIN = "text/plain"
OCTET_STREAM = "application/octet-stream"

FREQUENCIES = ("per-boot", "per-instance", "per-once")
SHELLSCRIPT_BY_FREQUENCY = {f"text/x-shellscript-{freq}": freq for freq in FREQUENCIES}

# What a part starts with (case-insensitive, after leading whitespace) -> its content type.
PREFIX_TYPES = {
    "#include": INCLUDE,
    "#include-once": INCLUDE_ONCE,
    "#!": SHELLSCRIPT,
    "#cloud-config": CLOUD_CONFIG,
    "#part-handler": PART_HANDLER,
    "#cloud-boothook": BOOTHOOK,
    "#cloud-config-archive": CLOUD_CONFIG_ARCHIVE,
    "#cloud-config-jsonp": CLOUD_CONFIG_JSONP,
    "## template: jinja": JINJA,
    # These can only be declared in MIME, but cloud-init also accepts them as prefixes.
    **{ctype: ctype for ctype in SHELLSCRIPT_BY_FREQUENCY},
}
_PREFIXES_LONGEST_FIRST = sorted(PREFIX_TYPES, key=len, reverse=True)

# Types whose declared value is only a hint: the payload's prefix decides.
TYPES_DETECTED_FROM_CONTENT = (PLAIN, NOT_MULTIPART, SHELLSCRIPT)

GZIP_TYPES = (
    "application/gzip", "application/gzip-compressed", "application/gzipped",
    "application/x-compress", "application/x-compressed", "application/x-gunzip",
    "application/x-gzip", "application/x-gzip-compressed",
)

# Every content type a built-in handler consumes (includes and archives are expanded earlier).
HANDLED_TYPES = (CLOUD_CONFIG, CLOUD_CONFIG_JSONP, SHELLSCRIPT, BOOTHOOK, PART_HANDLER, JINJA,
                 *SHELLSCRIPT_BY_FREQUENCY)


def content_type_from_start(payload: str | bytes, default: str | None = None) -> str | None:
    """The content type implied by the payload's first characters, or ``default``."""
    if isinstance(payload, bytes):
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError:
            return default
    head = payload.lstrip()[:64].lower()
    for prefix in _PREFIXES_LONGEST_FIRST:
        if head.startswith(prefix):
            return PREFIX_TYPES[prefix]
    return default


@dataclass
class Part:
    """One piece of processed user-data: a script, a boothook, a part-handler, an unhandled part.

    ``name`` is the file name the part is stored under (the MIME filename cleaned of unsafe
    characters, else ``part-NNN`` counting parts from 1), ``filename`` the name the user gave.
    """

    name: str
    content: bytes
    content_type: str
    filename: str | None = None
    index: int = 0                       # position among all parts (for part-handlers)
    headers: dict[str, str] = field(default_factory=dict)
    launch_index: int | None = None

    def text(self) -> str:
        """The content as text (undecodable bytes replaced)."""
        return self.content.decode("utf-8", "replace")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "content": self.text()}


@dataclass
class ProcessedUserData:
    """What a user-data or vendor-data blob became."""

    cloud_config: dict | None = None
    scripts: list[Part] = field(default_factory=list)
    boothooks: list[Part] = field(default_factory=list)
    scripts_per_freq: dict[str, list[Part]] = field(
        default_factory=lambda: {freq: [] for freq in FREQUENCIES})
    handlers: list[Part] = field(default_factory=list)
    unhandled: list[Part] = field(default_factory=list)   # parts no built-in handler takes
    errors: list[str] = field(default_factory=list)
    cloud_config_sources: list[str] = field(default_factory=list)  # names of the merged parts

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        """The ``cloudseed userdata show --json`` object."""
        return {
            "cloud_config": self.cloud_config,
            "scripts": [p.to_json() for p in self.scripts],
            "boothooks": [p.to_json() for p in self.boothooks],
            "scripts_per_freq": {freq: [p.to_json() for p in parts]
                                 for freq, parts in self.scripts_per_freq.items()},
            "handlers": [p.to_json() for p in self.handlers],
            "errors": list(self.errors),
        }
