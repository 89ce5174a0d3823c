"""Writes a bench run to disk: ``results.json``, ``results.md`` and PNG charts.

``results.json`` holds everything (every run's value of every figure, the tables, targets,
limits, machine and settings), so other tools and later runs can read it; ``results.md`` is
the human report (machine, settings, one section per part with its tables and notes, the
charts); charts are drawn with matplotlib when it is installed (``seglog[bench]``), one PNG
per chart spec a part declared, as horizontal bars at the median with min..max whiskers.
Without matplotlib the report says charts were skipped and why.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from .runner import BenchRun
from .table import STATUS_OK, PartResult


def write_report(run: BenchRun, out_dir: str | Path, *, charts: bool = True) -> dict[str, str]:
    """Write the report files into ``out_dir`` (created); returns ``{kind: path}``.

    ``kind`` is ``json``, ``md`` and ``chart:<name>`` per PNG; ``charts_note`` is set in the
    Markdown when charts were skipped.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    chart_note = ""
    chart_files: dict[str, list[str]] = {}
    if charts:
        try:
            chart_files = draw_charts(run, out)
        except ImportError as exc:
            chart_note = f"charts skipped: matplotlib is not installed ({exc}); " \
                         "`pip install seglog[bench]` adds it"
    else:
        chart_note = "charts skipped (--no-charts)"
    for name, files in chart_files.items():
        for i, path in enumerate(files):
            written[f"chart:{name}:{i}"] = path
    json_path = out / "results.json"
    payload = run.to_json()
    payload["charts"] = {name: [Path(p).name for p in files] for name, files in
                         chart_files.items()}
    payload["charts_note"] = chart_note
    json_path.write_text(json.dumps(payload, indent=1, default=_json_default) + "\n",
                         encoding="utf-8")
    written["json"] = str(json_path)
    md_path = out / "results.md"
    md_path.write_text(render_markdown(run, chart_files, chart_note), encoding="utf-8")
    written["md"] = str(md_path)
    return written


def _json_default(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def render_markdown(run: BenchRun, chart_files: dict[str, list[str]], chart_note: str) -> str:
    """The Markdown report of a run."""
    m = run.machine
    fs = m.get("filesystem", {})
    lines = [
        "# seglog bench results",
        "",
        f"Run {run.started_at}, mode `{run.config.mode}`, {run.elapsed_s:.0f} s. Every figure "
        f"is the median of {run.profile.runs} runs (article: {run.profile.article_runs}) with "
        "min..max; every ratio is computed per run from two figures measured in that run. "
        "MB/s counts payload bytes (10^6 B), GB/s 10^9 B.",
        "",
        "| machine | |",
        "|---|---|",
        f"| CPU | {m.get('cpu', '')} ({m.get('cpu_count')} logical CPUs) |",
        f"| memory | {m.get('memory_bytes', 0) / 2**30:.1f} GiB |",
        f"| kernel / Python | {m.get('system', '')} {m.get('kernel', '')} / "
        f"{m.get('implementation', '')} {m.get('python', '')} |",
        f"| data dir file system | {fs.get('fstype', '?')} on {fs.get('source', '?')} "
        f"({fs.get('options', '')}) |",
        f"| load average at start | {', '.join(f'{x:.2f}' for x in m.get('load_average', []))} |",
        "",
    ]
    if run.limits_source:
        lines += [f"Limits carried over from {run.limits_source}.", ""]
    if chart_note:
        lines += [f"_{chart_note}_", ""]
    for part in run.parts:
        lines.append(part.to_markdown())
        for path in chart_files.get(part.name, []):
            lines += ["", f"![{part.name}]({Path(path).name})"]
        lines.append("")
    return "\n".join(lines) + "\n"


def draw_charts(run: BenchRun, out: Path) -> dict[str, list[str]]:
    """One PNG per chart spec of each successful part; raises ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files: dict[str, list[str]] = {}
    for part in run.parts:
        if part.status != STATUS_OK:
            continue
        for index, spec in enumerate(part.charts):
            path = _draw_one(plt, part, spec, out / f"{part.name}-{index + 1}.png")
            if path:
                files.setdefault(part.name, []).append(path)
    return files


def _draw_one(plt, part: PartResult, spec: dict, path: Path) -> str:
    labels, medians, lows, highs = [], [], [], []
    for label, key in spec["bars"].items():
        fig = part.figures.get(key)
        if fig is None or not fig.values:
            continue
        labels.append(label)
        medians.append(fig.median)
        lows.append(fig.median - fig.min)
        highs.append(fig.max - fig.median)
    if not labels:
        return ""
    height_in = 1.2 + 0.35 * len(labels)
    figure, axes = plt.subplots(figsize=(9, height_in))
    positions = list(range(len(labels)))[::-1]
    axes.barh(positions, medians, xerr=[lows, highs], color="#4c72b0", ecolor="#333333",
              capsize=3)
    axes.set_yticks(positions)
    axes.set_yticklabels(labels, fontsize=8)
    if spec.get("log") or (min(medians) > 0 and max(medians) / min(medians) > 50):
        axes.set_xscale("log")
    axes.set_xlabel(spec.get("unit", ""))
    axes.set_title(spec["title"], fontsize=10)
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return str(path)

