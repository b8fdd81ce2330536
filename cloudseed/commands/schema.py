"""``cloudseed schema --config-file F [--annotate]`` / ``--system``: validate cloud-config.

Exit 0 when valid (warnings are printed but do not fail), 1 when not. Each problem names
the file, line and key path; unknown keys suggest the closest known one.
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
    parser.add_argument("--annotate", action="store_true", help="print the file with problems beside the lines")


def check_text(text: str, source: str, require_header: bool = True):
    """(problems as printable lines, error count) for one cloud-config document."""
    from cloudseed.agent.config import ConfigFileError, load_yaml_mapping
    from cloudseed.agent.schema import Problem, validate_config

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
    problems = validate_config(cfg, body)
    offset = text.count("\n", 0, len(text) - len(body)) if body is not text else 0
    for p in problems:
        if p.line is not None:
            p.line += offset
    return problems, sum(1 for p in problems if p.level == "error")


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
    documents: list[tuple[str, str, bool]] = []
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
        documents.append((args.config_file, text, True))
    else:
        from cloudseed.agent.config import CONFIG_FILES
        from cloudseed.agent.state import DATA_DIR
        from cloudseed.core.root import TargetRoot

        root = TargetRoot(args.root)
        for main_file, drop_dir in CONFIG_FILES:
            for path in [main_file] + [f"{drop_dir}/{n}" for n in root.listdir(drop_dir) if n.endswith(".cfg")]:
                if root.isfile(path):
                    documents.append((path, root.read_text(path), False))
        user_data = f"{DATA_DIR}/instance/user-data.txt"
        if root.isfile(user_data):
            text = root.read_text(user_data)
            if text.lstrip().startswith("#cloud-config"):
                documents.append((user_data, text, True))
    errors = 0
    for source, text, require_header in documents:
        problems, count = check_text(text, source, require_header)
        errors += count
        _report(source, text, problems, args.annotate)
    if errors:
        print(f"invalid: {errors} error(s)")
        return 1
    print("valid" + (f" ({len(documents)} document(s))" if len(documents) != 1 else ""))
    return 0
