"""Benchmark results as a table on the terminal (rich) and as Markdown for BENCHMARKS.md."""

from __future__ import annotations

from typing import Mapping, Sequence

from rich.console import Console
from rich.table import Table


def print_table(title: str, rows: Sequence[Mapping[str, object]]) -> None:
    if not rows:
        return
    table = Table(title=title, title_justify="left")
    for col in rows[0]:
        table.add_column(str(col))
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    Console().print(table)
    print(markdown(rows))


def markdown(rows: Sequence[Mapping[str, object]]) -> str:
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines)
