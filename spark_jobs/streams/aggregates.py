"""Declared aggregations: `grouped.agg(clicks=Count(), total=Sum("amount"), top=Max("amount"))`.

Each declaration names one field of the output value, a dict with the declared names in declared order.
The engine computes them over a batch with numpy, without calling Python per record
(nodes/declared_aggregations.py); the result is the one this user aggregate would give through the same
windows (tests/streams/test_declared_aggregations.py checks it):

- `Count()`: the records of the group, whatever their value (a null value counts);
- `Sum(field)`, `Min(field)`, `Max(field)`: over the group's values of `value[field]`; `Mean(field)` is their
  sum over their number. A record whose value is not a dict, lacks the field, or holds there None, a bool,
  a non-number or a float NaN has no value for the field: it counts in `Count()` and is skipped by the
  others, as SQL skips NULL. Until the group has a value of the field, they are None. Of equal values
  (0.0 and -0.0) `Min` and `Max` keep the later one.
- The dtype of `Sum`, `Min` and `Max` is "float64" (the default: ints are converted as Python's float()
  would) or "int64" (only ints in the int64 range are values; other numbers are skipped like any non-value;
  a sum wraps around at 64 bits, as a Java long does). `Mean` is float64.

Over session windows, which merge per key, the declarations run as that user aggregate (with a merger),
called once per record by the session store's batch merge (`SessionStore.merge_batch`), not vectorized.

Floating-point sums are accumulated in record order, one addition per value as a Python loop would do,
so results match a user function's to the last bit. The Arrow type of the output value is
`spark_jobs.spark.topics.aggregate_struct(declarations)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DTYPES = ("float64", "int64")


class DeclaredAggregate:
    """One output field of `agg(...)`: its kind, the value field it reads (None for Count) and its dtype."""

    __slots__ = ("field", "dtype")
    kind = ""

    def __init__(self, field: str | None, dtype: str) -> None:
        if field is not None and (not isinstance(field, str) or not field):
            raise ValueError(f"{type(self).__name__} takes the name of a value field, got {field!r}")
        if dtype not in DTYPES:
            raise ValueError(f"{type(self).__name__}: dtype must be one of {DTYPES}, got {dtype!r}")
        self.field = field
        self.dtype = dtype

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (other.field, other.dtype) == (self.field, self.dtype)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.kind, self.field, self.dtype))

    def __repr__(self) -> str:
        if self.field is None:
            return f"{type(self).__name__}()"
        dtype = "" if self.dtype == "float64" or self.kind == "mean" else f", dtype={self.dtype!r}"
        return f"{type(self).__name__}({self.field!r}{dtype})"


class Count(DeclaredAggregate):
    """The number of records of the group (int64)."""

    __slots__ = ()
    kind = "count"

    def __init__(self) -> None:
        super().__init__(None, "int64")


class Sum(DeclaredAggregate):
    """The sum of the group's values of `field`; None until it has one."""

    __slots__ = ()
    kind = "sum"

    def __init__(self, field: str, dtype: str = "float64") -> None:
        super().__init__(field, dtype)


class Min(DeclaredAggregate):
    """The least of the group's values of `field`; None until it has one."""

    __slots__ = ()
    kind = "min"

    def __init__(self, field: str, dtype: str = "float64") -> None:
        super().__init__(field, dtype)


class Max(DeclaredAggregate):
    """The greatest of the group's values of `field`; None until it has one."""

    __slots__ = ()
    kind = "max"

    def __init__(self, field: str, dtype: str = "float64") -> None:
        super().__init__(field, dtype)


class Mean(DeclaredAggregate):
    """The float64 sum of the group's values of `field` over their number; None until it has one."""

    __slots__ = ()
    kind = "mean"

    def __init__(self, field: str) -> None:
        super().__init__(field, "float64")


def check_declarations(declared: Mapping[str, Any]) -> dict[str, DeclaredAggregate]:
    """The declarations of `agg(**declared)`, checked: at least one, each a DeclaredAggregate."""
    if not declared:
        raise ValueError("agg needs at least one declaration, e.g. agg(count=Count())")
    for name, aggregate in declared.items():
        if not isinstance(aggregate, DeclaredAggregate) or type(aggregate) is DeclaredAggregate:
            raise ValueError(
                f"agg: {name}={aggregate!r} is not a declaration (Count(), Sum(f), Min(f), Max(f), Mean(f))"
            )
    return dict(declared)
