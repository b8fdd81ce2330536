"""Rendering ``## template: jinja`` parts with instance data, as cloud-init's templates see it.

The variables are the instance-data keys (``v1.local_hostname``, ``ds.meta_data...``, ...),
with ``v1``/``v2``... children also copied to the top level (``{{ local_hostname }}``), every
key that contains a Jinja operator character also reachable with those characters replaced by
``_`` (``ds.meta_data.local_hostname`` for ``local-hostname``), and the keys listed under
``base64-encoded-keys`` decoded. An undefined variable renders as
``CI_MISSING_JINJA_VAR/<name>`` (cloud-init's marker) and is reported. Jinja2 is imported only
here, when a template part is actually rendered.
"""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

MISSING_PREFIX = "CI_MISSING_JINJA_VAR/"
_HEADER = re.compile(r"##\s*template:(.*)", re.I)
_VERSION_KEY = re.compile(r"v\d+$")


class TemplateError(Exception):
    """A template part that cannot be rendered; the message says why."""


def _b64decode(value: Any) -> Any:
    raw = base64.b64decode(value)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def jinja_variables(instance_data: dict, operator_pattern: re.Pattern[str] | None = None) -> dict:
    """The variables a template sees, from instance data (see the module docstring)."""
    pattern = operator_pattern or re.compile(r"[-.]")
    decode_paths = [p.replace("-", "_") for p in instance_data.get("base64-encoded-keys", [])]
    return _convert(instance_data, "", decode_paths, pattern)


def _convert(data: dict, prefix: str, decode_paths: list[str], pattern: re.Pattern[str]) -> dict:
    result: dict[str, Any] = {}
    for key, value in sorted(data.items(), key=lambda kv: str(kv[0])):
        path = f"{prefix}/{key}" if prefix else str(key)
        if path in decode_paths:
            value = _b64decode(value)
        if isinstance(value, dict):
            result[key] = _convert(value, path, decode_paths, pattern)
            if _VERSION_KEY.match(str(key)):
                for child, child_value in result[key].items():
                    result[child] = copy.deepcopy(child_value)
        else:
            result[key] = value
        alias = pattern.sub("_", str(key))
        if alias != key:
            result[alias] = copy.deepcopy(result[key])
    return result


def render_template_part(payload: str, instance_data: dict | None) -> tuple[str | None, list[str]]:
    """Render a template part: (rendered text, or None when nothing usable came out; problems)."""
    first_line, _, body = payload.partition("\n")
    match = _HEADER.match(first_line)
    if not match:
        raise TemplateError("the first line must be '## template: jinja'")
    kind = match.group(1).lower().strip()
    if kind != "jinja":
        raise TemplateError(f"unknown template type {kind!r} (only 'jinja' is supported)")
    if instance_data is None:
        raise TemplateError("no instance data to render the template with")
    try:
        import jinja2
        from jinja2.lexer import operator_re
    except ImportError:
        raise TemplateError("Jinja2 is not installed, so templates cannot be rendered")

    class MissingVariable(jinja2.DebugUndefined):
        def __str__(self) -> str:
            return f"{MISSING_PREFIX}{self._undefined_name}"

        def __sub__(self, other: Any) -> Any:
            other_name = str(other).replace(MISSING_PREFIX, "")
            raise TypeError(f'undefined variable "{self._undefined_name}-{other_name}": Jinja read '
                            f'this as a subtraction; did you mean "{self._undefined_name}_{other_name}"?')

    variables = jinja_variables(instance_data, operator_re)
    try:
        template = jinja2.Template(body, undefined=MissingVariable, trim_blocks=True,
                                   extensions=["jinja2.ext.do"])
        rendered = template.render(**variables) + ("\n" if body.endswith("\n") else "")
    except jinja2.TemplateSyntaxError as e:
        # +1: the template body starts on the part's second line
        raise TemplateError(f"template syntax error at line {(e.lineno or 0) + 1}: {e.message}")
    except (TypeError, jinja2.UndefinedError) as e:
        return None, [f"template not rendered: {e}"]
    except Exception as e:  # a template can raise anything (filters, do-statements)
        raise TemplateError(f"rendering failed: {type(e).__name__}: {e}")
    missing = sorted({m[len(MISSING_PREFIX):] for m in re.findall(re.escape(MISSING_PREFIX) + r"\S+", rendered)})
    problems = [f"undefined template variable(s): {', '.join(missing)}"] if missing else []
    return (rendered or None), problems
