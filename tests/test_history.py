"""A cell's series over commits, and where asv's step detection says a regression began."""

from __future__ import annotations

import pandas as pd
import pytest

from fusedbench.catalog.model import parse_cell
from fusedbench.errors import FusedbenchError
from fusedbench.regressions.history import regression_start


def series(values):
    return pd.DataFrame({"commit": [f"{i:040x}" for i in range(len(values))], "time_s": values})


def test_the_first_commit_of_a_step_up_is_named():
    assert regression_start(series([10.0, 10.1, 9.9, 10.0, 12.0, 12.1, 11.9])) == f"{4:040x}"


def test_a_flat_series_a_step_down_or_too_short_a_history_names_nothing():
    assert regression_start(series([10.0, 10.1, 9.9, 10.0, 10.05])) is None
    assert regression_start(series([12.0, 12.1, 10.0, 10.1])) is None
    assert regression_start(series([10.0, 12.0])) is None


def test_a_cell_is_written_as_in_the_tables():
    assert parse_cell("RELU_BIAS/fp16/(65536,16384)x(16384,8192)/fused") == {
        "epilog": "RELU_BIAS",
        "dtype": "fp16",
        "m": 65536,
        "k": 16384,
        "n": 8192,
        "provider": "fused",
    }
    for bad in ("RELU_BIAS/fp16/fused", "RELU/fp16/8192x4096/fused"):
        with pytest.raises(FusedbenchError, match="cell"):
            parse_cell(bad)
