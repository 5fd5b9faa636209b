"""`cascade-plan check`'s reports: JUnit XML for CI and a markdown summary (GitHub's step summary) of the
results engine/checks.py judges."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from cascade_plan.engine.checks import CheckResult

NO_CHECKS = "no checks: add a `checks:` section to the workload or pass threshold options"


def junit_xml(results: dict[str, list[CheckResult]], unchecked: Sequence[str] = ()) -> str:
    """One testsuite per workload, one testcase per check; a workload without checks is one skipped testcase.
    Built with ElementTree, which escapes every attribute and text (well-formed whatever the names hold)."""
    failed = sum(not c.passed for r in results.values() for c in r)
    total = sum(map(len, results.values())) + len(unchecked)
    root = ET.Element("testsuites", name="cascade-plan check", tests=str(total), failures=str(failed),
                      skipped=str(len(unchecked)))
    for suite, checks in results.items():
        el = ET.SubElement(root, "testsuite", name=suite, tests=str(len(checks)),
                           failures=str(sum(not c.passed for c in checks)))
        for c in checks:
            case = ET.SubElement(el, "testcase", classname=suite, name=c.name)
            if c.passed:
                ET.SubElement(case, "system-out").text = c.text
            else:
                ET.SubElement(case, "failure", message=c.text).text = c.text
    for suite in unchecked:
        el = ET.SubElement(root, "testsuite", name=suite, tests="1", failures="0", skipped="1")
        ET.SubElement(ET.SubElement(el, "testcase", classname=suite, name="checks"), "skipped", message=NO_CHECKS)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def md_cell(text: str) -> str:
    """A markdown table cell: `|` would end the cell and a newline the row (GitHub's tables have no other escape)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_summary(results: dict[str, list[CheckResult]], label: str, unchecked: Sequence[str] = ()) -> str:
    """A table GitHub's step summary renders as is."""
    failed = sum(not c.passed for r in results.values() for c in r)
    head = "all checks pass" if not failed else f"{failed} check{'s' if failed > 1 else ''} failed"
    if unchecked:
        head += f"; {len(unchecked)} workload{'s' if len(unchecked) > 1 else ''} without checks"
    lines = [f"### cascade-plan check: {head}", "", f"Numbers: {label}", "",
             "| workload | check | result | measured vs threshold |", "| --- | --- | --- | --- |"]
    for suite, checks in results.items():
        for c in checks:
            mark = "✅ pass" if c.passed else "❌ fail"
            lines.append(f"| {md_cell(suite)} | `{c.name}` | {mark} | {md_cell(c.text.split(': ', 1)[1])} |")
    for suite in unchecked:
        lines.append(f"| {md_cell(suite)} | — | ➖ no checks | add a `checks:` section or threshold options |")
    return "\n".join(lines) + "\n"
