"""MedFlow-Bench's tables, one file each, built from any set of runs (models x modules x tracks x budgets).

:data:`TABLES` lists every table of a report in the order it shows them; a report keeps those with a row.
"""

from __future__ import annotations

from ..runs import Run
from . import findings, runs_table, stability, table1, table2, table3, table5, table6, table7
from .grouping import pooling_warnings
from .layout import Cell, Column, Row, Section, Table

TABLES = (runs_table.build, table1.build, table2.build, table3.build, table5.build, table6.build, table7.build,
          findings.build, stability.build)


def all_tables(runs: list[Run]) -> list[Table]:
    """Every table that has at least one row (a report over Track A runs has no Table 3/6)."""
    return [table for table in (build(runs) for build in TABLES) if not table.empty]


__all__ = ["TABLES", "Cell", "Column", "Row", "Section", "Table", "all_tables", "pooling_warnings"]
