"""Rows of a DataFrame as plain Python tuples, for the loops that read cells one at a time.

pandas 3 keeps text in string columns: iterating one (`zip(frame["group"], ...)`, `itertuples`) fetches each value
through the column's array, ten times slower than taking the column as a list first, and the gate and the advice
walk tens of thousands of cells a report that way.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd


def plain_rows(frame: pd.DataFrame, columns: list[str]) -> Iterator[tuple]:
    """Each row's `columns` as a tuple of plain values, in the frame's order."""
    return zip(*(frame[column].tolist() for column in columns), strict=True)
