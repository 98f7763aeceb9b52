"""JUnit XML of a gated comparison (`rtscope compare --junit FILE`) and of a reproduction's claims (`rtscope
reproduce --junit FILE`), the format GitLab, Jenkins and LAVA read.

One <testsuite> per comparison set, one <testcase> per configuration × metric (classname: the configuration's
label, name: the metric). A row that fails the gate (analysis.gate) has a <failure> whose message gives the
value, the change, the 95% interval of the difference, the Holm-adjusted p and the verdict; a row that was not
tested, or a configuration left without a baseline, is <skipped> with the reason. Written through a temp file
and a rename: a failed run never leaves half a file.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.compare import METRICS, EarlierComparisonSet
from ..analysis.defaults import ROWS
from ..analysis.recommend import change, p_text
from ..analysis.results import display_unit, fmt
from ..fileio import write_atomic

if TYPE_CHECKING:
    from ..analysis.compare import Comparison, ComparisonSet, Row
    from ..analysis.gate import Gate


def row_message(k: Comparison, r: Row) -> str:
    """'value 412 µs (baseline 198 µs), change +108%, 95% CI of Δ 200..230 µs, p (Holm) 1.2e-05, verdict worse'."""
    shown, scale = display_unit(k.cell.config.unit)
    ci = f"{fmt(r.metric, r.ci[0], scale)}..{fmt(r.metric, r.ci[1], scale)} {shown}" if r.ci else \
        "none (this test gives no interval)"
    return (f"value {fmt(r.metric, r.value, scale)} {shown} (baseline {fmt(r.metric, r.baseline, scale)} {shown}), "
            f"change {change(r.ratio)}, 95% CI of Δ {ci}, p (Holm) {p_text(r.p_holm)}, verdict {r.verdict}")


def baseline_text(cs: ComparisonSet) -> str:
    return cs.baseline_text if isinstance(cs, EarlierComparisonSet) else cs.baseline.text


def document(cs: ComparisonSet, gate: Gate) -> ET.Element:
    """The <testsuites> element of one comparison set."""
    labels = cs.labels
    suite = ET.Element("testsuite", name=f"rtscope compare against {baseline_text(cs)}")
    props = ET.SubElement(suite, "properties")
    for name, value in (("baseline", baseline_text(cs)), ("fail_on", gate.text), ("alpha", f"{cs.alpha:g}"),
                        ("correction", "holm"), ("enforced", str(gate.enforced).lower())):
        ET.SubElement(props, "property", name=name, value=value)
    counts = {"tests": 0, "failures": 0, "skipped": 0}

    def case(label: str, metric: str) -> ET.Element:
        counts["tests"] += 1
        return ET.SubElement(suite, "testcase", classname=label, name=metric)

    for k in cs.comparisons:
        label, base = labels[k.cell.config], labels[k.base.config]
        for r in k.rows:
            tc = case(label, r.metric)
            message = f"{row_message(k, r)}; against {base}"
            if gate.fails(r):
                counts["failures"] += 1
                ET.SubElement(tc, "failure", message=message, type=r.verdict).text = \
                    f"{r.metric} of {label} is significantly worse than {base}: {row_message(k, r)} " \
                    f"({r.test}, α = {cs.alpha:g} after Holm over the whole set)" + (f"; {r.note}" if r.note else "")
            elif r.verdict == "not tested":
                counts["skipped"] += 1
                ET.SubElement(tc, "skipped", message=f"not tested: {r.reason}")
            else:
                gated = "" if r.metric in gate.metrics else f" (not gated: --fail-on {gate.text})"
                ET.SubElement(tc, "system-out").text = message + gated
    for cell, why in cs.unmatched:
        for metric in ROWS if cs.tail else METRICS:
            counts["skipped"] += 1
            ET.SubElement(case(labels[cell.config], metric), "skipped", message=f"not compared: {why}")
    for key, n in counts.items():
        suite.set(key, str(n))
    suite.set("errors", "0")
    root = ET.Element("testsuites", name="rtscope compare", tests=str(counts["tests"]),
                      failures=str(counts["failures"]), skipped=str(counts["skipped"]), errors="0")
    root.append(suite)
    return root


def write(cs: ComparisonSet, gate: Gate, path: str | Path) -> dict[str, int]:
    """Write the JUnit XML atomically (a UsageError when it cannot be written); its tests, failures, skipped."""
    root = document(cs, gate)
    ET.indent(root)
    write_atomic(path, ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n", "JUnit file")
    return {k: int(root.get(k)) for k in ("tests", "failures", "skipped")}


def claims_document(judgements: list, name: str, enforced: bool) -> ET.Element:
    """`rtscope reproduce --junit`: one <testcase> per claim (classname: the spec, name: the claim's id); a
    contradicted claim is a <failure>, an undecided or unmeasurable one <skipped> with the reason."""
    suite = ET.Element("testsuite", name=f"rtscope reproduce {name}")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="fail_on", value="contradicted" if enforced else "")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for j in judgements:
        counts["tests"] += 1
        tc = ET.SubElement(suite, "testcase", classname=name, name=j.claim.id)
        doc = j.to_json()
        message = (f"{j.claim.text} ({j.claim.metric}, expect {j.claim.expect_text}): measured "
                   f"{doc['measured']['baseline']} → {doc['measured']['cell']} {doc['measured']['unit']}, "
                   f"interval {doc['interval']}, p (Holm) {p_text(j.p_holm)}, verdict {j.verdict}")
        if j.verdict == "contradicted":
            counts["failures"] += 1
            ET.SubElement(tc, "failure", message=message, type="contradicted").text = message
        elif j.verdict != "holds":
            counts["skipped"] += 1
            ET.SubElement(tc, "skipped", message=f"{j.verdict}: {j.reason}" + (
                f" ({j.runs_needed} runs per configuration would decide it)" if j.runs_needed else ""))
        else:
            ET.SubElement(tc, "system-out").text = message
    for key, n in counts.items():
        suite.set(key, str(n))
    suite.set("errors", "0")
    root = ET.Element("testsuites", name="rtscope reproduce", errors="0",
                      **{k: str(v) for k, v in counts.items()})
    root.append(suite)
    return root


def write_claims(judgements: list, name: str, path: str | Path, enforced: bool = False) -> dict[str, int]:
    root = claims_document(judgements, name, enforced)
    ET.indent(root)
    write_atomic(path, ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n", "JUnit file")
    return {k: int(root.get(k)) for k in ("tests", "failures", "skipped")}
