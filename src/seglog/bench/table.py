"""What a bench part returns, and how it is printed: tables, targets, notes.

A part returns one :class:`PartResult`: a few :class:`Table` objects (already formatted cells,
one row per measurement), one-sentence notes computed from the figures, the raw
:class:`~seglog.bench.stats.Figure` objects by key (for results.json and the charts) and the
targets it checked. The same objects render as aligned plain text for the terminal and as
Markdown for ``results.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .load import PartLoad
from .stats import Figure

STATUS_OK = "ok"
STATUS_UNAVAILABLE = "unavailable"
STATUS_ERROR = "error"


@dataclass
class Table:
    """A titled table of formatted cells; ``rows`` hold strings, one list per row."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    note: str = ""
    #: ``(row, column, target)`` of every cell that shows a target's verdict: the runner
    #: sets the part's load on its targets after the part ends and re-renders these cells.
    verdict_cells: list[tuple[int, int, "Target"]] = field(default_factory=list)

    def add(self, *cells: Any) -> None:
        """Append one row (cells converted with ``str``; the row is padded to the columns).

        A :class:`Target` cell shows its verdict and stays linked to the target, so the
        verdict can still change once the part's load is known (:meth:`refresh_verdicts`).
        """
        row = []
        for index, cell in enumerate(cells):
            if isinstance(cell, Target):
                self.verdict_cells.append((len(self.rows), index, cell))
                row.append(cell.verdict)
            else:
                row.append("" if cell is None else str(cell))
        assert len(row) <= len(self.columns), f"{self.title}: row wider than columns: {row}"
        row += [""] * (len(self.columns) - len(row))
        self.rows.append(row)

    def refresh_verdicts(self) -> None:
        """Re-render the cells that show a target's verdict (after its load was set)."""
        for row, column, target in self.verdict_cells:
            self.rows[row][column] = target.verdict

    def to_text(self) -> str:
        """Aligned plain text: title, header, rule, rows (numbers right-aligned)."""
        widths = [len(c) for c in self.columns]
        for row in self.rows:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], len(cell))
        right = [self._numeric_column(i) for i in range(len(self.columns))]

        def line(cells: list[str]) -> str:
            parts = [
                cell.rjust(widths[i]) if right[i] else cell.ljust(widths[i])
                for i, cell in enumerate(cells)
            ]
            return "  ".join(parts).rstrip()

        out = [self.title, line(self.columns), "  ".join("-" * w for w in widths)]
        out += [line(row) for row in self.rows]
        if self.note:
            out.append(self.note)
        return "\n".join(out)

    def to_markdown(self) -> str:
        """A GitHub Markdown table with the title as a bold line above it."""
        def esc(cell: str) -> str:
            return cell.replace("|", "\\|")

        align = ["---:" if self._numeric_column(i) else "---" for i in range(len(self.columns))]
        out = [f"**{self.title}**", "", "| " + " | ".join(esc(c) for c in self.columns) + " |",
               "|" + "|".join(align) + "|"]
        out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in self.rows]
        if self.note:
            out += ["", self.note]
        return "\n".join(out)

    def to_json(self) -> dict:
        """``{"title", "columns", "rows", "note"}``."""
        return {"title": self.title, "columns": self.columns, "rows": self.rows,
                "note": self.note}

    def _numeric_column(self, index: int) -> bool:
        cells = [row[index] for row in self.rows if row[index] not in ("", "n/a", "-")]
        return bool(cells) and all(c[:1].isdigit() or c[:1] in "-+." for c in cells)


@dataclass
class Target:
    """A goal from the issues, checked against a figure measured in this run.

    ``value`` is the measured median (a ratio or a rate), ``threshold`` the goal and ``met``
    whether ``value >= threshold``. ``label`` says what is compared, ``goal`` how the issue
    states it (e.g. ``">= 20x pure"``). ``judged`` False marks a goal shown beside a figure
    this run measures but cannot judge (too small a run, or a reference side missing): its
    verdict is ``'measured'``. ``load`` is the machine's load during the part, set by the
    runner when the part ends: a miss while the machine was busy says so.
    """

    label: str
    goal: str
    value: float
    threshold: float
    judged: bool = True
    load: PartLoad | None = None

    @property
    def met(self) -> bool:
        """True when the measured median reaches the threshold."""
        return self.value == self.value and self.value >= self.threshold

    @property
    def verdict(self) -> str:
        """``'met'``, ``'MISSED'`` (capitals so a miss stands out in a table), ``'MISSED under
        load 3.1'`` when the machine was busy during the part, or ``'measured'`` when the
        target is not judged in this run."""
        if not self.judged:
            return "measured"
        if self.met:
            return "met"
        if self.load is not None and self.load.busy:
            return f"MISSED under load {self.load.peak_1m:.1f}"
        return "MISSED"

    def to_json(self) -> dict:
        """The target with its verdict, for results.json."""
        return {"label": self.label, "goal": self.goal, "value": self.value,
                "threshold": self.threshold, "met": self.met, "judged": self.judged,
                "verdict": self.verdict}


@dataclass
class PartResult:
    """Everything one part produced.

    ``status`` is ``ok``, ``unavailable`` (a dependency is missing; ``reason`` says which) or
    ``error`` (the part raised; ``reason`` holds the exception). A part that is ``ok`` may still
    list unavailable sub-measurements in ``notes``. ``figures`` maps a stable key (used by
    results.json, charts and other parts) to its :class:`Figure`. ``charts`` lists chart specs
    for the report: ``{"title", "unit", "bars": {label: figure_key}}``.
    """

    name: str
    title: str
    status: str = STATUS_OK
    reason: str = ""
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Figure] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    charts: list[dict] = field(default_factory=list)
    elapsed_s: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)
    load: PartLoad | None = None

    def apply_load(self, load: PartLoad) -> None:
        """Record the machine's load during the part on it and on its targets; re-render the
        verdict cells, and add a ``targets`` table for targets no table shows yet."""
        self.load = load
        for target in self.targets:
            target.load = load
        shown = set()
        for table in self.tables:
            for _, _, target in table.verdict_cells:
                target.load = load
                shown.add(id(target))
            table.refresh_verdicts()
        unshown = [t for t in self.targets if id(t) not in shown]
        if unshown:
            table = Table(f"{self.name}: targets", ["target", "measured", "goal", "verdict"])
            for target in unshown:
                table.add(target.label, _fmt_value(target.value), target.goal, target)
            self.tables.append(table)

    def _footer(self) -> str:
        load = f"; {self.load.describe()}" if self.load is not None else ""
        return f"{self.elapsed_s:.1f} s{load}"

    def figure(self, key: str, unit: str) -> Figure:
        """The figure called ``key``, created empty with ``unit`` on first use."""
        fig = self.figures.get(key)
        if fig is None:
            fig = self.figures[key] = Figure(unit=unit)
        return fig

    def to_text(self) -> str:
        """The part as it is printed on the terminal."""
        head = f"== {self.name}: {self.title} =="
        if self.status != STATUS_OK:
            return f"{head}\n{self.status}: {self.reason}"
        blocks = [head]
        blocks += [t.to_text() for t in self.tables]
        if self.notes:
            blocks.append("\n".join(f"* {n}" for n in self.notes))
        blocks.append(f"({self._footer()})")
        return "\n\n".join(blocks)

    def to_markdown(self) -> str:
        """The part as a section of results.md."""
        head = f"## {self.name}: {self.title}"
        if self.status != STATUS_OK:
            return f"{head}\n\n{self.status}: {self.reason}"
        blocks = [head]
        if self.params:
            blocks.append("Parameters: " + ", ".join(f"`{k}={v}`" for k, v in self.params.items()))
        blocks += [t.to_markdown() for t in self.tables]
        if self.notes:
            blocks.append("\n".join(f"* {n}" for n in self.notes))
        blocks.append(f"_({self._footer()})_")
        return "\n\n".join(blocks)

    def to_json(self) -> dict:
        """The part for results.json (figures with every run's value)."""
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "reason": self.reason,
            "elapsed_s": self.elapsed_s,
            "load": self.load.to_json() if self.load is not None else None,
            "params": self.params,
            "tables": [t.to_json() for t in self.tables],
            "notes": self.notes,
            "figures": {k: f.to_json() for k, f in self.figures.items()},
            "targets": [t.to_json() for t in self.targets],
        }


def _fmt_value(value: float) -> str:
    """A target's measured value (a ratio or a headroom) for the generic targets table."""
    if value != value:
        return "n/a"
    if abs(value) >= 1e5:
        return f"{value:,.0f}"
    return f"{value:.2f}x" if abs(value) < 100 else f"{value:.0f}x"
