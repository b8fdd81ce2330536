"""``cloudseed make-mime -a FILE:TYPE ... [--list-types] [--force]``: a MIME multipart user-data.

cloud-init's ``devel make-mime``: each ``--attach FILE:TYPE`` becomes one part (``TYPE`` without
``text/``, e.g. ``cloud-config``, ``x-shellscript``) named after the file; the message goes to
standard output. A type the agent does not handle is an error (exit 1) unless ``--force``.
``--list-types`` prints the types it handles.
"""

from __future__ import annotations

import argparse
import sys

HELP = "build a MIME multipart user-data from files (cloud-init devel make-mime)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attach", "-a", dest="files", action="append", default=[], metavar="FILE:TYPE",
                        help="attach FILE as content type TYPE (cloud-config, x-shellscript, ...)")
    parser.add_argument("--list-types", "-l", action="store_true", help="list the content types handled")
    parser.add_argument("--force", "-f", action="store_true", help="accept content types not handled")


def content_types() -> list[str]:
    """Every type a part may declare (the ``text/`` types user-data processing handles)."""
    from cloudseed.agent.userdata.parts import PREFIX_TYPES

    return sorted(set(PREFIX_TYPES.values()))


def run(args: argparse.Namespace) -> int:
    from email.mime.multipart import MIMEMultipart
    from email.mime.text import MIMEText

    known = content_types()
    if args.list_types:
        print("\n".join(t.replace("text/", "", 1) for t in known))
        return 0
    message = MIMEMultipart()
    problems = []
    for number, spec in enumerate(args.files, 1):
        path, sep, subtype = spec.rpartition(":")
        if not sep or not path or not subtype.strip():
            print(f"make-mime: --attach {spec!r}: expected FILE:TYPE", file=sys.stderr)
            return 1
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            print(f"make-mime: {path}: {e.strerror}", file=sys.stderr)
            return 1
        part = MIMEText(text, subtype.strip(), "utf-8")
        part.add_header("Content-Disposition", f'attachment; filename="{path}"')
        if part.get_content_type().lower() not in known:
            problems.append(f"content type {part.get_content_type()!r} for attachment {number} may be incorrect!")
        message.attach(part)
    if problems:
        level = "WARNING" if args.force else "ERROR"
        for problem in problems:
            print(f"{level}: {problem}", file=sys.stderr)
        print("Invalid content-types, override with --force", file=sys.stderr)
        if not args.force:
            return 1
    print(message)
    return 0
