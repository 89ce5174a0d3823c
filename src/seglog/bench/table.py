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

    def add(self, *cells: Any) -> None:
        """Append one row (cells converted with ``str``; the row is padded to the columns)."""
        row = ["" if c is None else str(c) for c in cells]
        assert len(row) <= len(self.columns), f"{self.title}: row wider than columns: {row}"
        row += [""] * (len(self.columns) - len(row))
        self.rows.append(row)

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
    states it (e.g. ``">= 20x pure"``).
    """

    label: str
    goal: str
    value: float
    threshold: float

    @property
    def met(self) -> bool:
        """True when the measured median reaches the threshold."""
        return self.value == self.value and self.value >= self.threshold

    @property
    def verdict(self) -> str:
        """``'met'`` or ``'MISSED'`` (capitals so a miss stands out in a table)."""
        return "met" if self.met else "MISSED"

    def to_json(self) -> dict:
        """The target with its verdict, for results.json."""
        return {"label": self.label, "goal": self.goal, "value": self.value,
                "threshold": self.threshold, "met": self.met}


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
        blocks.append(f"({self.elapsed_s:.1f} s)")
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
        blocks.append(f"_({self.elapsed_s:.1f} s)_")
        return "\n\n".join(blocks)

    def to_json(self) -> dict:
        """The part for results.json (figures with every run's value)."""
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "reason": self.reason,
            "elapsed_s": self.elapsed_s,
            "params": self.params,
            "tables": [t.to_json() for t in self.tables],
            "notes": self.notes,
            "figures": {k: f.to_json() for k, f in self.figures.items()},
            "targets": [t.to_json() for t in self.targets],
        }
