"""What the rules need to run on pandas: the topics of one validation, and SQL's meanings in pandas terms.

A scheduled run validates what it published plus a small context (scope.py): tens of thousands of rows,
where a Spark job per rule costs far more than the rule itself. `local_scope.py` reads those rows into
pandas and every rule evaluates them in process (`RowsRuleExpectation.flagged_rows`), beside its Spark SQL
(`rows_query`), which stays for `--full` and for scopes too large for one process. The helpers here make
the pandas side mean exactly what the SQL means: null-safe equality (`<=>`), `LAG` and running `MAX`
over an order that ignore nulls, struct fields as `a.b` columns.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

# The other topics of the output being validated, by name, for cross-topic rules (Spark: temp views).
_TOPICS: contextvars.ContextVar[Mapping[str, pd.DataFrame] | None] = contextvars.ContextVar(
    "local_topics", default=None
)


@contextlib.contextmanager
def local_topics(frames: Mapping[str, pd.DataFrame]) -> Iterator[None]:
    """Expose `frames` (topic -> rows) to the rules evaluated inside the block."""
    token = _TOPICS.set(dict(frames))
    try:
        yield
    finally:
        _TOPICS.reset(token)


def topic_frame(topic: str) -> pd.DataFrame:
    """A topic of the output being validated; a missing topic fails the rule, as a missing view does."""
    frames = _TOPICS.get()
    if frames is None or topic not in frames:
        raise LookupError(f"topic {topic!r} is not part of this validation")
    return frames[topic]


def column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A column, or a struct field `a.b` (local_scope.py adds struct fields as columns of that name)."""
    if name not in frame.columns:
        raise KeyError(f"no column {name!r} (columns: {', '.join(map(str, frame.columns))})")
    return frame[name]


def comparable(values: pd.Series) -> list[Any]:
    """Values that compare as SQL's `<=>` does: every null equal to every other, structs by their fields."""
    out = []
    for value in values.tolist():
        if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
            out.append(None)
        elif isinstance(value, dict | list):
            out.append(json.dumps(value, sort_keys=True, default=str))
        else:
            out.append(value)
    return out


def row_keys(frame: pd.DataFrame, names: Sequence[str]) -> list[tuple]:
    """One tuple per row of the `names` columns, null-safe (see `comparable`)."""
    if not len(frame):
        return []
    return list(zip(*(comparable(column(frame, name)) for name in names), strict=True))


def in_order(frame: pd.DataFrame, partition_by: Sequence[str], order_by: Sequence[str]) -> pd.DataFrame:
    """The rows sorted as `OVER (PARTITION BY .. ORDER BY ..)` sees them (stable, nulls first as Spark's
    ascending order puts them)."""
    names = [*partition_by, *order_by]
    if not names:
        return frame
    for name in names:
        column(frame, name)
    return frame.sort_values(names, kind="stable", na_position="first")


def previous(ordered: pd.DataFrame, partition_by: Sequence[str], names: Sequence[str]) -> pd.DataFrame:
    """`LAG(name) OVER (PARTITION BY .. ORDER BY ..)` for each name, on rows already `in_order`."""
    values = ordered[list(names)]
    if not partition_by:
        return values.shift(1)
    return values.groupby([ordered[p] for p in partition_by], dropna=False, sort=False).shift(1)


def running_max_before(ordered: pd.DataFrame, partition_by: str, values: pd.Series) -> pd.Series:
    """`MAX(values) OVER (PARTITION BY p ORDER BY .. ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)`
    on rows already `in_order`: nulls are skipped, a row with nothing before it gets null."""
    groups = ordered[partition_by]
    running = values.groupby(groups, dropna=False, sort=False).cummax()
    # cummax leaves a null row null; SQL's MAX carries the earlier maximum past it.
    running = running.groupby(groups, dropna=False, sort=False).ffill()
    return running.groupby(groups, dropna=False, sort=False).shift(1)


def records(frame: pd.DataFrame, limit: int) -> list[dict[str, Any]]:
    """The first `limit` rows as JSON-ready dicts (nulls as None), without the `a.b` struct-field copies."""
    shown = frame.head(limit)
    shown = shown[[c for c in shown.columns if "." not in str(c)]]
    return json.loads(shown.to_json(orient="records", date_format="iso", default_handler=str))
