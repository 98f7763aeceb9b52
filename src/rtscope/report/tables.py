"""The report's tables as Markdown, LaTeX (booktabs) and CSV files.

statistics-<unit>: the study-style table per configuration (AVG MAX VAR STDEV,
percentiles), named after the unit it holds (`statistics-microseconds` for
times, `statistics-bytes`); comparisons: one row per configuration and metric, with the
verdict; task-memory: the least-squares fits. A report of a study's
experiment adds its paper's view (report/paper_view.py): paper-<study> (one
file per table, numbered when the layout makes several: storage's per file
size), each measured figure with the published one in brackets (CSV: a
`published` column beside each), and claims-<study>, each claim with its
verdict. Markdown and LaTeX carry the display values (µs); CSV carries
full-precision numbers in the display unit named in each header, for further
processing.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from ..analysis.compare import TESTS
from ..analysis.recommend import change, p_text
from ..analysis.results import display_unit, fmt
from ..errors import UsageError
from ..fileio import write_atomic
from .html import STATS_COLUMNS
from .model import Report, id_ranges
from .paper_view import claim_rows

LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                 "<": r"\textless{}", ">": r"\textgreater{}", "µ": r"\textmu{}", "²": r"\textsuperscript{2}",
                 "δ": r"$\delta$", "α": r"$\alpha$", "Δ": r"$\Delta$", "≤": r"$\leq$", "≥": r"$\geq$",
                 "·": r"$\cdot$", "−": "-", "…": r"\dots{}"}


@dataclass
class TableData:
    name: str
    caption: str
    heads: list[str]
    rows: list[list[str]]          # display text
    raw: list[list]                # CSV values (numbers unrounded)
    numeric: list[bool]            # right-align
    csv_heads: list[str] | None = None


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def markdown_escape(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;") \
        .replace("\n", " ")


def to_markdown(t: TableData) -> str:
    lines = [f"**{markdown_escape(t.caption)}**", "",
             "| " + " | ".join(markdown_escape(h) for h in t.heads) + " |",
             "| " + " | ".join("---:" if n else ":---" for n in t.numeric) + " |"]
    lines += ["| " + " | ".join(markdown_escape(c) for c in row) + " |" for row in t.rows]
    return "\n".join(lines) + "\n"


def to_latex(t: TableData) -> str:
    spec = "".join("r" if n else "l" for n in t.numeric)
    lines = [r"% needs \usepackage{booktabs}", r"\begin{table}[htbp]", r"\centering",
             rf"\caption{{{latex_escape(t.caption)}}}", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(latex_escape(h) for h in t.heads) + r" \\", r"\midrule"]
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in t.rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_csv(t: TableData) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.csv_heads or t.heads)
    w.writerows(t.raw)
    return buf.getvalue()


def _scaled(key: str, value, scale: float):
    if value is None:
        return ""
    return value * scale * scale if key == "var" else value if key == "n" else value * scale


FILE_UNIT = {"µs": "microseconds"}   # a file is named after the unit its figures are in, in ASCII


def statistics_tables(report: Report) -> list[TableData]:
    out: dict[str, TableData] = {}
    for c in report.cells:
        unit = c.config.unit
        shown, scale = display_unit(unit)
        if unit not in out:
            heads = ["configuration", "runs"] + [h + ("" if k == "n" else f" ({shown}²)" if k == "var" else
                                                      f" ({shown})") for k, h in STATS_COLUMNS]
            name = FILE_UNIT.get(shown, shown) or "values"
            out[unit] = TableData(f"statistics-{name}", f"Statistics per configuration ({shown}; repetitions pooled)",
                                  heads, [], [], [False, False] + [True] * len(STATS_COLUMNS))
        t = out[unit]
        label, runs = report.labels[c.config], id_ranges([r.id for r in c.runs])
        t.rows.append([label, runs, *(fmt(k, c.stats.get(k), scale) for k, _ in STATS_COLUMNS)])
        t.raw.append([label, runs, *(_scaled(k, c.stats.get(k), scale) for k, _ in STATS_COLUMNS)])
    return list(out.values())


def comparison_table(report: Report) -> TableData | None:
    """Markdown/LaTeX: the columns a paper prints (tests and units in the caption); CSV: every field."""
    cs = report.comparisons
    if cs is None or not cs.comparisons:
        return None
    labels = cs.labels
    units = sorted({display_unit(k.cell.config.unit)[0] for k in cs.comparisons})
    heads = ["configuration", "metric", "baseline", "value", "change", "95% CI of difference", "p (Holm)",
             "Cliff's δ", "verdict"]
    csv_heads = ["configuration", "baseline", "metric", "unit", "baseline value", "value", "change (ratio - 1)",
                 "CI95 low", "CI95 high", "test", "p", "p Holm", "Cliff's delta", "magnitude", "verdict"]
    tests = "; ".join(f"{m}: {t}" for m, t in TESTS.items())
    t = TableData("comparisons", f"Against {cs.baseline.text} ({', '.join(units)}; lower is better; p-values "
                                 f"Holm-corrected, α = {cs.alpha:g}; tests: {tests})", heads, [], [],
                  [False, False, True, True, True, True, True, False, False], csv_heads)
    for k in cs.comparisons:
        shown, scale = display_unit(k.cell.config.unit)
        delta = f"{k.cliffs_delta:+.2f} ({k.magnitude})" if k.cliffs_delta is not None else ""
        for i, r in enumerate(k.rows):
            ci = r.ci or (None, None)
            t.rows.append([labels[k.cell.config] if i == 0 else "", r.metric, fmt(r.metric, r.baseline, scale),
                           fmt(r.metric, r.value, scale), change(r.ratio),
                           f"{fmt(r.metric, ci[0], scale)} .. {fmt(r.metric, ci[1], scale)}" if r.ci else "",
                           p_text(r.p_holm), delta if r.metric == "median" else "", r.verdict])
            t.raw.append([labels[k.cell.config], labels[k.base.config], r.metric, shown,
                          _scaled(r.metric, r.baseline, scale), _scaled(r.metric, r.value, scale),
                          "" if r.ratio is None else r.ratio - 1.0, _scaled(r.metric, ci[0], scale),
                          _scaled(r.metric, ci[1], scale), r.test, "" if r.p is None else r.p,
                          "" if r.p_holm is None else r.p_holm, "" if k.cliffs_delta is None else k.cliffs_delta,
                          k.magnitude or "", r.verdict])
    return t


def task_memory_table(report: Report) -> TableData | None:
    if not report.task_memory:
        return None
    shown, scale = display_unit(report.task_memory_unit)
    heads = ["task model", "runs", "points", f"slope ({shown}/task)", f"intercept ({shown})", "r", "r²"]
    t = TableData("task-memory", "Memory per task: least-squares fits (r: Pearson's correlation coefficient, "
                                 "r²: coefficient of determination)", heads, [], [],
                  [False, False, True, True, True, True, True])
    for s in report.task_memory:
        f = s.fit
        runs = id_ranges(s.run_ids)
        t.rows.append([s.label, runs, str(len(s.tasks)), f"{f.slope * scale:,.1f}" if f else "",
                       f"{f.intercept * scale:,.0f}" if f else "", f"{f.r:.4f}" if f and f.r is not None else "",
                       f"{f.r2:.4f}" if f and f.r2 is not None else ""])
        t.raw.append([s.label, runs, len(s.tasks), f.slope * scale if f else "", f.intercept * scale if f else "",
                      "" if not f or f.r is None else f.r, "" if not f or f.r2 is None else f.r2])
    return t


def _file_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "study"


def paper_tables(report: Report) -> list[TableData]:
    """The study's own tables: measured figures with the published ones in brackets (CSV: beside them)."""
    v = report.paper
    if v is None:
        return []
    out = []
    for i, pt in enumerate(v.tables, 1):
        name = f"paper-{_file_name(v.spec)}" + (f"-{i}" if len(v.tables) > 1 else "")
        caption = (f"{v.spec}, the study's table{f' ({v.source})' if v.source else ''}: {pt.title}; measured "
                   f"on {v.machine}, published figures in brackets (measured on {v.hardware}; shown, never "
                   "tested); runs of a configuration pooled")
        t = TableData(name, caption, [pt.row_head, "runs", *pt.heads], [], [],
                      [False, False] + [True] * len(pt.heads),
                      [pt.row_head, "runs", *(h for head in pt.value_heads or pt.heads
                                              for h in (head, f"{head} published"))])
        for row in pt.rows:
            t.rows.append([row.label, row.runs, *(f"{m} ({p})" if p else m for m, p in row.cells)])
            t.raw.append([row.label, row.runs, *("" if x is None else x for pair in row.values for x in pair)])
        out.append(t)
    return out


def claims_table(report: Report) -> TableData | None:
    """The study's claims, each with its verdict (as `rtscope reproduce` judges stored runs)."""
    v = report.paper
    if v is None or not v.claims:
        return None
    heads = ["claim", "metric", "expect", "published", "measured (baseline → cell)", "runs", "95% interval",
             "verdict", "why"]
    csv_heads = ["claim", "text", "source", "metric", "expect", "published baseline", "published cell",
                 "published unit", "measured baseline", "measured cell", "measured unit", "ratio", "baseline runs",
                 "runs", "interval of", "interval low", "interval high", "p", "p Holm", "verdict", "why"]
    tested = sum(j.p_holm is not None for j in v.claims)
    from ..analysis.claims import evidence_text
    t = TableData(f"claims-{_file_name(v.spec)}", f"Claims of {v.spec} judged on these runs, as `rtscope "
                  f"reproduce` judges stored runs (lower/higher: {evidence_text(v.claims)}; same: two one-"
                  f"sided tests within the margin; Holm over {tested} such claims, α = {v.alpha:g}; ratio and "
                  "below: the 95% interval)", heads, [], [], [False, False, False, True, True, True, True, False,
                                                                False], csv_heads)
    for j, row in zip(v.claims, claim_rows(v)):
        t.rows.append([f"{row['id']}: {row['text']}", row["metric"], row["expect"], row["published"],
                       row["measured"], row["runs"], row["interval"], row["verdict"], row["why"]])
        doc = j.to_json()
        pub, measured, interval = doc["published"] or {}, doc["measured"], doc["interval"] or {}
        t.raw.append([row["id"], row["text"], row["source"], row["metric"], row["expect"],
                      *(pub.get(k, "") for k in ("baseline", "cell", "unit")),
                      *("" if measured[k] is None else measured[k] for k in ("baseline", "cell")),
                      measured["unit"], "" if measured["ratio"] is None else measured["ratio"],
                      measured["baseline_runs"], measured["runs"], interval.get("of", ""),
                      *("" if interval.get(k) is None else interval[k] for k in ("low", "high")),
                      *("" if x is None else x for x in (j.p, j.p_holm)), row["verdict"], row["why"]])
    return t


def all_tables(report: Report) -> list[TableData]:
    return [*paper_tables(report), *statistics_tables(report),
            *(t for t in (claims_table(report), comparison_table(report), task_memory_table(report)) if t)]


def write(report: Report, directory: str | Path) -> list[Path]:
    """Every table as .md, .tex and .csv under `directory`; returns the files written."""
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create table directory {directory}: {e.strerror or e}") from None
    files = []
    for t in all_tables(report):
        for ext, render in (("md", to_markdown), ("tex", to_latex), ("csv", to_csv)):
            path = d / f"{t.name}.{ext}"
            write_atomic(path, render(t), "table")
            files.append(path)
    return files

