"""The module reference (``docs/modules.md``), generated from what each module declares.

One section per module: its title, stage, frequency, distros, the keys that activate it, every
key of its schema (with type and description, nested keys as ``a.b`` and ``a[].b``) and its
examples. Run ``python -m cloudseed.agent.config.module_reference > docs/modules.md`` after adding or
changing a module; a test fails while the committed file differs from a fresh generation.
Never imported at boot.
"""

from __future__ import annotations

import sys
from typing import Any, Iterator

from cloudseed.agent.modules import all_module_names, load_module

COMMAND = ".venv/bin/python -m cloudseed.agent.config.module_reference > docs/modules.md"


def describe_type(schema: Any) -> str:
    """A short human reading of a JSON-schema fragment's type ("array of string", "true | false")."""
    if not isinstance(schema, dict):
        return "any"
    alternatives = schema.get("oneOf") or schema.get("anyOf")
    if alternatives and "type" not in schema and "enum" not in schema:
        described = [describe_type(alt) for alt in alternatives]
        return " | ".join(dict.fromkeys(d for d in described if d != "any")) or "any"
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else ([kind] if kind else [])
    if "enum" in schema:
        values = ", ".join(_literal(v) for v in schema["enum"])
        return f"{' | '.join(kinds)} ({values})" if kinds and len(schema["enum"]) > 1 else values
    words = []
    for one in kinds or ["any"]:
        if one == "array" and isinstance(schema.get("items"), dict):
            item = describe_type(schema["items"])
            words.append(f"array of ({item})" if " | " in item else f"array of {item}")
        else:
            words.append(one)
    text = " | ".join(words)
    if schema.get("pattern"):
        text += f" matching `{schema['pattern']}`"
    return text


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return f'"{value}"' if isinstance(value, str) else str(value)


def key_rows(properties: dict, prefix: str = "") -> Iterator[tuple[str, dict]]:
    """``(path, schema)`` for every key under ``properties``, nested keys after their parent."""
    for key, schema in properties.items():
        path = f"{prefix}{key}"
        yield path, schema if isinstance(schema, dict) else {}
        yield from _nested(schema, path)


def _nested(schema: Any, path: str) -> Iterator[tuple[str, dict]]:
    if not isinstance(schema, dict):
        return
    if isinstance(schema.get("properties"), dict):
        yield from key_rows(schema["properties"], f"{path}.")
    for pattern, sub in (schema.get("patternProperties") or {}).items():
        yield f"{path}.<{pattern}>", sub
    if isinstance(schema.get("items"), dict):
        yield from _nested(schema["items"], f"{path}[]")
    for alt in schema.get("oneOf") or schema.get("anyOf") or []:
        yield from _nested(alt, path)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _description(schema: dict) -> str:
    text = str(schema.get("description", ""))
    if schema.get("deprecated"):
        text = (text + " " if text else "") + "**Deprecated.** " + str(schema.get("deprecated_description", ""))
    return text.strip()


def module_section(name: str) -> str:
    spec, _handle = load_module(name)
    lines = [f"## {spec.name}", "", spec.title or "(no title)", ""]
    lines += [
        f"- **stage:** {spec.stage}",
        f"- **frequency:** {spec.frequency}",
        f"- **distros:** {', '.join(spec.distros) if spec.distros else 'all'}",
        "- **activated by:** " + (", ".join(f"`{k}`" for k in spec.activate_by) if spec.activate_by
                                  else "always runs when listed"),
        "",
    ]
    rows: dict[str, dict] = {}
    for path, schema in key_rows((spec.schema or {}).get("properties") or {}):
        rows.setdefault(path, schema)
    if rows:
        lines += ["| key | type | description |", "|---|---|---|"]
        lines += [f"| `{_cell(path)}` | {_cell(describe_type(schema))} | {_cell(_description(schema))} |"
                  for path, schema in rows.items()]
    else:
        lines.append("No configuration keys of its own.")
    lines.append("")
    for index, example in enumerate(spec.examples, 1):
        text = example if example.startswith("#cloud-config") else "#cloud-config\n" + example
        lines += [f"Example {index}:", "", "```yaml", text.rstrip("\n"), "```", ""]
    return "\n".join(lines)


def reference() -> str:
    names = all_module_names()
    head = [
        "# Module reference",
        "",
        f"Generated from the modules' declarations by `{COMMAND}`; do not edit by hand.",
        "",
    ]
    head += [f"- [{n}](#{n}): {load_module(n)[0].title}" for n in names]
    return "\n".join(head) + "\n\n" + "\n".join(module_section(n) for n in names)


def main() -> int:
    sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
