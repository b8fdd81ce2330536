"""System file templates (``hosts.debian.tmpl``...): found in the target, rendered with values.

A template named ``hosts.debian`` is looked up first in the target's ``/etc/cloudseed/templates``
(the user's override), then in ``/etc/cloud/templates`` (images prepared for cloud-init), then in
the defaults shipped in ``cloudseed/data/templates``. A first line ``## template:jinja`` marks it
as Jinja; templates that only use ``{{ name }}`` and ``{# comments #}`` are rendered without
importing Jinja2 (the boot path), anything with ``{% ... %}`` needs Jinja2. The final newline of
the template is kept (as cloud-init's templater does).
"""

from __future__ import annotations

import os
import re
from typing import Any

from cloudseed.core.root import TargetRoot

USER_TEMPLATE_DIRS = ("/etc/cloudseed/templates", "/etc/cloud/templates")
PACKAGE_TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "data", "templates")

_HEADER = re.compile(r"^##\s*template:\s*(\w+)\s*$", re.IGNORECASE)
_COMMENT = re.compile(r"(\s*)\{#(-?)(.*?)(-?)#\}", re.DOTALL)
_VARIABLE = re.compile(r"\{\{-?\s*([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}")


class TemplateError(Exception):
    """A template is missing or cannot be rendered; the message names the file."""


def find_template(root: TargetRoot, name: str) -> tuple[str, str]:
    """(where it was found, text) of template ``name`` (without ``.tmpl``)."""
    for directory in USER_TEMPLATE_DIRS:
        inner = f"{directory}/{name}.tmpl"
        if root.isfile(inner):
            return f"{root.path(inner)}", root.read_text(inner)
    packaged = os.path.join(PACKAGE_TEMPLATE_DIR, f"{name}.tmpl")
    try:
        with open(packaged, encoding="utf-8") as handle:
            return packaged, handle.read()
    except FileNotFoundError:
        raise TemplateError(f"no template {name}.tmpl in {', '.join(USER_TEMPLATE_DIRS)} "
                            "or the packaged defaults") from None


def render(text: str, values: dict[str, Any], source: str = "template") -> str:
    """Render a template text (its ``## template:`` line removed) with ``values``."""
    first, _, rest = text.partition("\n")
    match = _HEADER.match(first.strip())
    if match:
        if match.group(1).lower() != "jinja":
            raise TemplateError(f"{source}: unknown template type {match.group(1)!r} (only jinja)")
        text = rest
    if "{%" in text:
        return _render_jinja(text, values, source)
    return _render_simple(text, values)


def _render_simple(text: str, values: dict[str, Any]) -> str:
    """``{{ name }}`` and ``{# comment #}`` with Jinja's whitespace rules (trim_blocks on)."""
    out: list[str] = []
    position = 0
    for match in _COMMENT.finditer(text):
        if match.start() < position:
            continue
        lead = match.group(1)
        out.append(text[position:match.start()])
        if not match.group(2):
            out.append(lead)  # "{#-" would have eaten the whitespace before
        position = match.end()
        if match.group(4):  # "-#}" eats all whitespace after
            while position < len(text) and text[position].isspace():
                position += 1
        elif text.startswith("\n", position):  # trim_blocks: the first newline after
            position += 1
    out.append(text[position:])

    def value(found: re.Match) -> str:
        item = values.get(found.group(1))
        return "" if item is None else str(item)

    return _VARIABLE.sub(value, "".join(out))


def _render_jinja(text: str, values: dict[str, Any], source: str) -> str:
    try:
        import jinja2
    except ImportError:
        raise TemplateError(f"{source}: uses Jinja blocks but Jinja2 is not installed") from None
    try:
        template = jinja2.Template(text, trim_blocks=True, undefined=jinja2.Undefined)
        # Jinja drops the final newline; keep it, as the file had it
        return template.render(**values) + ("\n" if text.endswith("\n") else "")
    except jinja2.TemplateError as e:
        raise TemplateError(f"{source}: {e}") from None


def render_named(root: TargetRoot, name: str, values: dict[str, Any]) -> str:
    source, text = find_template(root, name)
    return render(text, values, source)
