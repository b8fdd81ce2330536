"""``--junit FILE``: the checks of one or more lab runs as JUnit XML, for CI systems.

One ``<testsuite>`` per run (a try, one VM of ``--parallel``), one ``<testcase>`` per check
(classname: what was checked, name: which aspect), a ``<failure>`` with what was expected and what
was found. A run that did not get as far as its checks (the agent never finished, the VM did not
start) is one failed testcase that says so. Written atomically.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Optional

from cloudseed.lab.reports.checks import Check


@dataclass
class SuiteRun:
    name: str  # "try 1", "web.yaml"
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0
    error: Optional[str] = None  # why there are no checks to report


def write(path: str, runs: list[SuiteRun]) -> None:
    suites = ET.Element("testsuites", name="cloudseed lab")
    total = failures = 0
    for run in runs:
        failed = [c for c in run.checks if not c.ok] + ([None] if run.error else [])
        count = len(run.checks) + (1 if run.error else 0)
        total, failures = total + count, failures + len(failed)
        suite = ET.SubElement(suites, "testsuite", name=run.name, tests=str(count), failures=str(len(failed)),
                              errors="0", time=f"{run.seconds:.3f}")
        if run.error:
            case = ET.SubElement(suite, "testcase", classname=run.name, name="boot")
            ET.SubElement(case, "failure", message=run.error).text = run.error
        for check in run.checks:
            case = ET.SubElement(suite, "testcase", classname=check.subject, name=check.aspect)
            if not check.ok:
                message = f"expected {check.expected}, found {check.found}"
                failure = ET.SubElement(case, "failure", message=message)
                failure.text = check.describe()
    suites.set("tests", str(total))
    suites.set("failures", str(failures))
    ET.indent(suites)
    partial = f"{path}.partial"
    ET.ElementTree(suites).write(partial, encoding="utf-8", xml_declaration=True)
    os.replace(partial, path)
