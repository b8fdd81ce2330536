"""``cloudseed schema --config-file F [--annotate]`` / ``--system`` / ``--modules-table``.

Validates cloud-config: exit 0 when valid (warnings are printed but do not fail), 1 when not.
Each problem names the file, line and deepest key path. A top-level key no cloudseed module
declares is one of two kinds: a key cloud-init documents that cloudseed does not do here (a
warning, with the reason), or an unknown key (an error, as in cloud-init 24.x and later; a
did-you-mean only when one is close). With
``--system`` the reasons name the target's distro. ``--modules-table`` prints the status page of
all of cloud-init's modules (``docs/modules-status.md`` is this output).
"""

from __future__ import annotations

import argparse
import sys

HELP = "validate cloud-config against the modules' schemas"


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config-file", "-c", metavar="FILE", help="a cloud-config file (- for stdin)")
    source.add_argument("--system", action="store_true",
                        help="this system's config files and the current instance's user-data")
    source.add_argument("--modules-table", action="store_true",
                        help="print the Markdown table of cloud-init's modules and what cloudseed does with each")
    parser.add_argument("--schema-type", "-t", choices=("cloud-config", "network-config"), default="cloud-config",
                        help="what --config-file holds (default: cloud-config)")
    parser.add_argument("--instance-data", "-i", metavar="FILE",
                        help="instance-data JSON to render a '## template: jinja' file with before checking it "
                             "(default: this system's, when it has one)")
    parser.add_argument("--annotate", action="store_true", help="print the file with problems beside the lines")


def check_text(text: str, source: str, require_header: bool = True, os_release: dict[str, str] | None = None):
    """(problems as printable lines, error count) for one cloud-config document."""
    from cloudseed.agent.config import ConfigFileError, load_yaml_mapping
    from cloudseed.agent.config.schema import Problem, validate_config

    body = text
    first = text.lstrip().split("\n", 1)[0].strip().lower()
    if first.startswith("## template:"):
        body = text.split("\n", 1)[1] if "\n" in text else ""
        first = body.lstrip().split("\n", 1)[0].strip().lower()
    if require_header and not first.startswith("#cloud-config"):
        return [Problem("", "not cloud-config: the first line must be '#cloud-config'", line=1)], 1
    try:
        cfg = load_yaml_mapping(body, source)
    except ConfigFileError as e:
        message = str(e)
        line = None
        if ", line " in message:
            try:
                line = int(message.split(", line ", 1)[1].split(":", 1)[0])
            except ValueError:
                pass
        return [Problem("", message.split(": ", 1)[-1], line=line)], 1
    # a document that needs the header is user-data; one that does not is a system configuration file
    problems = validate_config(cfg, body, os_release=os_release, user_data=require_header)
    offset = text.count("\n", 0, len(text) - len(body)) if body is not text else 0
    for p in problems:
        if p.line is not None:
            p.line += offset
    return problems, sum(1 for p in problems if p.level == "error")


def check_network_text(text: str, source: str):
    """(problems, error count) for one network-config document (v1, v2, or ``network:`` around either).

    What the agent would refuse at boot is an error here, named by its key path and line; so is a
    form the agent applies but cloud-init 26.x's schema refuses where a spelling both accept exists
    (``cloudseed.network.cloud_init_schema``: the message says what to write). An empty document is
    nothing to check (as in cloud-init).
    """
    from cloudseed.agent.config import ConfigFileError, load_yaml_mapping
    from cloudseed.agent.config.schema import Problem, key_lines
    from cloudseed.network import NetworkConfigError, parse
    from cloudseed.network.cloud_init_schema import problems as cloud_init_problems

    try:
        cfg = load_yaml_mapping(text, source) if text.strip() else {}
    except ConfigFileError as e:
        return [Problem("", str(e).split(": ", 1)[-1])], 1
    if not (cfg.get("network", cfg) if isinstance(cfg, dict) else cfg):
        return [Problem("", "empty network-config: nothing to check", "warning")], 0
    try:
        parse(cfg, macs={})
    except NetworkConfigError as e:
        path, _, message = str(e).partition(": ")
        if not message:
            path, message = "", path
        return [Problem(path, message, line=key_lines(text).get(path))], 1
    found = cloud_init_problems(cfg)
    lines = key_lines(text) if found else {}
    return ([Problem(path, message, level, line=lines.get(path)) for path, message, level in found],
            sum(level == "error" for _, _, level in found))


def render_template(text: str, source: str, instance_data_file: str | None, root_dir: str):
    """``text`` rendered with instance data when it is a ``## template: jinja`` file, else ``text``.

    (rendered text, problem or None). The instance data is ``instance_data_file``, else the
    system's (``/run/cloudseed/instance-data-sensitive.json``, then the world-readable one).
    """
    import json

    from cloudseed.agent.config.schema import Problem

    first = text.lstrip().split("\n", 1)[0].strip().lower().replace(" ", "")
    if not first.startswith("##template:"):
        return text, None
    data = None
    if instance_data_file:
        try:
            with open(instance_data_file, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as e:
            return None, Problem("", f"cannot read instance data {instance_data_file}: {e.strerror}", line=1)
        except ValueError as e:
            return None, Problem("", f"instance data {instance_data_file} is not JSON: {e}", line=1)
    else:
        from cloudseed.agent.state import RUN_DIR
        from cloudseed.core.root import TargetRoot

        root = TargetRoot(root_dir)
        for name in ("instance-data-sensitive.json", "instance-data.json"):
            if root.isfile(f"{RUN_DIR}/{name}"):
                try:
                    data = json.loads(root.read_text(f"{RUN_DIR}/{name}"))
                    break
                except (OSError, ValueError):
                    continue
    if not isinstance(data, dict):
        return None, Problem("", "cannot render the '## template: jinja' file: no instance data on this system "
                                 "(give --instance-data FILE)", line=1)
    from cloudseed.agent.userdata.jinja_parts import TemplateError, render_template_part

    try:
        rendered, notes = render_template_part(text.lstrip(), data)
    except TemplateError as e:
        return None, Problem("", f"{source}: {e}", line=1)
    if rendered is None:
        return None, Problem("", "; ".join(notes) or "the template rendered to nothing", line=1)
    # the header line stays, so that line numbers are the file's (as long as the template keeps lines)
    return text.lstrip().split("\n", 1)[0] + "\n" + rendered, None


def _user_data_type(text: str) -> str | None:
    """The content type a user-data document's first line declares (after a rendered template's header)."""
    from cloudseed.agent.userdata.parts import JINJA, content_type_from_start

    kind = content_type_from_start(text)
    if kind == JINJA:
        kind = content_type_from_start(text.lstrip().split("\n", 1)[1] if "\n" in text.lstrip() else "")
    return kind


def _report(source: str, text: str, problems, annotate: bool) -> None:
    if annotate:
        by_line: dict[int, list[str]] = {}
        for p in problems:
            by_line.setdefault(p.line or 1, []).append(f"{p.level.upper()}: {p.path or '(top)'}: {p.message}")
        for number, line in enumerate(text.splitlines(), 1):
            notes = by_line.get(number)
            print(line + (f"\t\t# {' | '.join(notes)}" if notes else ""))
        return
    for p in problems:
        where = f"{source}:{p.line}" if p.line else source
        print(f"{where}: {p.level}: {p.path + ': ' if p.path else ''}{p.message}")


def run(args: argparse.Namespace) -> int:
    if args.modules_table:
        sys.stdout.write(modules_table())
        return 0
    documents: list[tuple[str, str, bool]] = []
    os_release = None
    if args.config_file:
        try:
            if args.config_file == "-":
                text = sys.stdin.read()
            else:
                with open(args.config_file, encoding="utf-8", errors="replace") as f:
                    text = f.read()
        except OSError as e:
            print(f"cloudseed schema: cannot read {args.config_file}: {e.strerror}")
            return 1
        if args.schema_type == "network-config":
            problems, count = check_network_text(text, args.config_file)
            _report(args.config_file, text, problems, args.annotate)
            print(f"invalid network-config: {count} error(s)" if count else "valid network-config")
            return 1 if count else 0
        rendered, problem = render_template(text, args.config_file, args.instance_data, args.root)
        if problem is not None:
            _report(args.config_file, text, [problem], args.annotate)
            print("invalid: 1 error(s)")
            return 1
        kind = _user_data_type(rendered)
        if kind is not None and kind != "text/cloud-config":
            # a script, an include, an archive...: as cloud-init 24.x+, nothing to check and no error
            print(f"{args.config_file}: user-data of type {kind}: the schema checks cloud-config only; "
                  "nothing to check")
            return 0
        documents.append((args.config_file, rendered, True))
    else:
        from cloudseed.agent.config import CONFIG_FILES
        from cloudseed.agent.state import DATA_DIR
        from cloudseed.core.root import TargetRoot

        root = TargetRoot(args.root)
        from cloudseed.agent.distros import read_os_release

        os_release = read_os_release(root)
        for main_file, drop_dir in CONFIG_FILES:
            for path in [main_file] + [f"{drop_dir}/{n}" for n in root.listdir(drop_dir) if n.endswith(".cfg")]:
                if root.isfile(path):
                    documents.append((path, root.read_text(path), False))
        user_data = f"{DATA_DIR}/instance/user-data.txt"
        if root.isfile(user_data):
            text = root.read_text(user_data)
            if _user_data_type(text) == "text/cloud-config":
                documents.append((user_data, text, True))
    errors = 0
    for source, text, require_header in documents:
        problems, count = check_text(text, source, require_header, os_release)
        errors += count
        _report(source, text, problems, args.annotate)
    if errors:
        print(f"invalid: {errors} error(s)")
        return 1
    print("valid" + (f" ({len(documents)} document(s))" if len(documents) != 1 else ""))
    return 0


# os-release IDs of the distros cloudseed's families cover (a module for none of them does not apply)
_OURS = ("debian", "ubuntu", "raspbian", "rhel", "fedora", "centos", "almalinux", "rocky", "cloudlinux",
         "eurolinux", "virtuozzo", "miraclelinux", "ol")


def modules_table() -> str:
    """``docs/modules-status.md``: every cloud-init module, and what cloudseed does with it."""
    from cloudseed.agent.config.known_keys import MODULES
    from cloudseed.agent.config.schema import _names
    from cloudseed.agent.modules import all_module_names, load_module

    specs = {}
    for name in all_module_names():
        try:
            specs[name] = load_module(name)[0]
        except ImportError:
            continue
    declared = {key for spec in specs.values() for key in (spec.schema or {}).get("properties", {})}
    rows = []
    for name in sorted(set(MODULES) | set(specs)):
        facts = MODULES.get(name, {})
        upstream = ", ".join(_names(facts.get("distros", ()))) or "all"
        keys = [f"`{k}`" for k in facts.get("keys", ())]
        spec = specs.get(name)
        if spec is not None:
            missing = [k for k in facts.get("keys", ()) if k not in declared]
            status = "implemented" + (f" (not: {', '.join(f'`{k}`' for k in missing)})" if missing else "")
            here = ", ".join(spec.distros) if spec.distros else "all"
        else:
            here = "-"
            distros = facts.get("distros", ())
            why = facts.get("why", "")
            if distros and not set(distros) & set(_OURS):
                status = f"not applicable: {why}, only on {upstream}" if why else f"not applicable: only on {upstream}"
            else:
                status = "not implemented" + (f": {why}" if why else "")
        if facts.get("note"):
            status += f"; {facts['note']}"
        if not facts:
            status += "; cloudseed's own"
        stage = spec.stage if spec is not None else facts.get("stage", "")
        rows.append(f"| {name} | {stage} | {status} | {upstream} | {here} | {', '.join(keys) or '-'} |")
    done = sum(1 for name in MODULES if name in specs)
    return "\n".join([
        "# cloud-init's modules in cloudseed",
        "",
        "Generated by `cloudseed schema --modules-table` from the module files (`cloudseed/agent/modules/`)",
        "and cloud-init's documented keys (`cloudseed/agent/config/known_keys.py`); do not edit by hand.",
        "",
        f"{done} of cloud-init's {len(MODULES)} modules are implemented. A configured key of a module that is",
        "not implemented or does not apply here is reported by `cloudseed schema` and at boot (the status is",
        "then degraded) as not done by cloudseed, with the reason; it is never silently ignored.",
        "",
        "| module | stage | cloudseed | cloud-init runs it on | cloudseed runs it on | keys |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ])
