"""Custom Great Expectations for event-time outputs: the project's promises as named, reusable rules.

Every rule is an `UnexpectedRowsExpectation` whose Spark SQL query is built from the expectation's fields
(column names, figures), so a suite names the rule and its parameters, never SQL. The query selects the
offending rows; a result in COMPLETE format carries them (`result.details.unexpected_rows`), and Data Docs
show them as a table under the rule.

Emission order is (partition, seq): `seq` is a record's position in its task's output order and
`partition` the task (docs/jobs.md). Rules about order therefore use window functions over that order, never
the row order of the dataframe, which Spark does not keep.

This module must be imported before any suite is loaded: GX skips, with only a log line, an expectation
whose class is not registered, and the suite then passes without it. `gx_context.load_suite` imports it
and refuses such suites.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections import Counter
from typing import Any, ClassVar

import pandas as pd
from great_expectations.compatibility import pydantic
from great_expectations.constants import MAX_RESULT_RECORDS
from great_expectations.core.suite_parameters import SuiteParameterDict
from great_expectations.execution_engine import PandasExecutionEngine
from great_expectations.expectations import UnexpectedRowsExpectation
from great_expectations.expectations.expectation import render_suite_parameter_string
from great_expectations.render import LegacyDiagnosticRendererType, LegacyRendererType
from great_expectations.render.components import RenderedStringTemplateContent, RenderedTableContent
from great_expectations.render.renderer.renderer import renderer

from spark_jobs.quality.local_frames import (
    column,
    in_order,
    previous,
    records,
    row_keys,
    running_max_before,
    topic_frame,
)

# Marks rows that a validation run reads as context only (spark_jobs.quality.scope).
CONTEXT_COLUMN = "_context"

# Failing rows shown per rule in Data Docs; the result itself keeps up to GX's limit (200).
ROWS_SHOWN_IN_DOCS = 20

# A column, or a field of a struct column (`value.last_event_time`).
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_TOPIC = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")

IntOrParameter = int | SuiteParameterDict

_LEADING_COLUMNS = ("key", "window_start", "window_end", "timestamp", "value", "partition", "seq")


def topic_view_name(topic: str) -> str:
    """The Spark temp view under which the validation job exposes a topic to cross-topic rules."""
    if not _TOPIC.match(topic):
        raise ValueError(f"not a topic name: {topic!r}")
    return "topic_" + re.sub(r"[^A-Za-z0-9_]", "_", topic)


def _quote(column: str) -> str:
    # Names come from suite files: only plain identifiers, quoted, so a name cannot change the query.
    if not _IDENTIFIER.match(column):
        raise ValueError(f"column names must be plain identifiers or struct fields (a.b), got {column!r}")
    return ".".join(f"`{part}`" for part in column.split("."))


def _alias(prefix: str, column: str) -> str:
    return f"`{prefix}_{column.replace('.', '_')}`"


def _columns(columns: list[str]) -> str:
    return ", ".join(_quote(c) for c in columns)


def _check_identifiers(value: Any) -> Any:
    names = value if isinstance(value, list) else [value]
    for name in names:
        _quote(name)
    return value


def _display(value: Any) -> str:
    if isinstance(value, dict) and "$PARAMETER" in value:
        return f"${value['$PARAMETER']}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _cell(value: Any) -> str:
    return "null" if value is None else str(value)


class RowsRuleExpectation(UnexpectedRowsExpectation, ABC):
    """An unexpected-rows rule whose query is derived from its fields.

    `unexpected_rows_query` stays at its empty default, so suites never store SQL; the query is put into the
    success kwargs that GX hands to the query metrics.
    """

    unexpected_rows_query: str = ""
    # A sentence for Data Docs with `$field` placeholders.
    rule_template: ClassVar[str] = ""

    @pydantic.validator("unexpected_rows_query", allow_reuse=True)
    def _query_is_derived(cls, query: str) -> str:
        if query:
            raise ValueError(f"{cls.__name__} builds its own query from its fields; do not set one")
        return query

    @abstractmethod
    def rows_query(self) -> str:
        """Spark SQL selecting the offending rows of `{batch}`."""

    @abstractmethod
    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        """The rows `rows_query` selects, from a pandas batch (local validation, see local_frames.py);
        the same rows, with the same added columns."""

    def get_validation_dependencies(self, execution_engine=None, runtime_configuration=None):
        dependencies = super().get_validation_dependencies(
            execution_engine=execution_engine, runtime_configuration=runtime_configuration
        )
        if isinstance(execution_engine, PandasExecutionEngine):
            # GX has no pandas version of the query metrics: `_validate` evaluates `flagged_rows` instead.
            for name in dependencies.get_metric_names():
                dependencies.remove_metric_configuration(name)
        return dependencies

    def _validate(self, metrics: dict, runtime_configuration: dict | None = None, execution_engine=None):
        if isinstance(execution_engine, PandasExecutionEngine):
            flagged = self.flagged_rows(execution_engine.get_domain_records(domain_kwargs={}))
            if CONTEXT_COLUMN in flagged.columns:
                flagged = flagged[~flagged[CONTEXT_COLUMN].astype(bool)]
            metrics = {
                "unexpected_rows_query.table": records(flagged, MAX_RESULT_RECORDS),
                "unexpected_rows_query.row_count": len(flagged),
            }
        return super()._validate(metrics, runtime_configuration, execution_engine)

    def _get_success_kwargs(self) -> dict[str, Any]:
        kwargs = super()._get_success_kwargs()
        # Rows kept from earlier validations (`_context`, see scope.py) inform the rule, never fail it.
        kwargs["unexpected_rows_query"] = (
            f"SELECT * FROM ({self.rows_query()}) AS flagged WHERE NOT flagged.`{CONTEXT_COLUMN}`"
        )
        return kwargs

    @classmethod
    def _field_defaults(cls) -> dict[str, Any]:
        return {name: field.default for name, field in cls.__fields__.items() if not field.required}

    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    @render_suite_parameter_string
    def _prescriptive_renderer(
        cls,
        configuration=None,
        result=None,
        runtime_configuration: dict | None = None,
        **kwargs,
    ) -> list[RenderedStringTemplateContent]:
        runtime_configuration = runtime_configuration or {}
        values = {**cls._field_defaults(), **(configuration.kwargs if configuration else {})}
        params = {name: _display(value) for name, value in values.items()}
        return [
            RenderedStringTemplateContent(
                content_block_type="string_template",
                string_template={
                    "template": cls.rule_template,
                    "params": params,
                    "styling": runtime_configuration.get("styling"),
                },
            )
        ]

    @classmethod
    @renderer(renderer_type=LegacyDiagnosticRendererType.UNEXPECTED_TABLE)
    def _diagnostic_unexpected_table_renderer(
        cls,
        configuration=None,
        result=None,
        runtime_configuration: dict | None = None,
    ) -> list[RenderedTableContent] | None:
        details = ((result.result or {}).get("details") or {}) if result is not None else {}
        rows = details.get("unexpected_rows")
        if not rows:
            return None
        # The record's identity first, then what the rule added, then the rest.
        first = [c for c in _LEADING_COLUMNS if c in rows[0]]
        header = first + [c for c in rows[0] if c not in first]
        table = [[_cell(row.get(column)) for column in header] for row in rows[:ROWS_SHOWN_IN_DOCS]]
        return [
            RenderedTableContent(
                content_block_type="table",
                header_row=header,
                table=table,
                styling={"body": {"classes": ["table-bordered", "table-sm", "mt-3"]}},
            )
        ]


class ExpectValuesToNeverDecreasePerKey(RowsRuleExpectation):
    """Per key, in emission order, `column` never goes down (or, with `strictly`, always goes up).

    A failing row is one whose value is below (or, strictly, not above) the previous row of its key; it is
    shown with that previous value and the previous row's order columns.
    """

    column: str
    key_columns: list[str] = ["key"]
    order_columns: list[str] = ["partition", "seq"]
    strictly: bool = False

    rule_template: ClassVar[str] = (
        "$column never decreases per ($key_columns), in ($order_columns) order (strictly increasing: $strictly)."
    )

    _names = pydantic.validator("column", "key_columns", "order_columns", allow_reuse=True)(
        _check_identifiers
    )

    @pydantic.validator("order_columns", allow_reuse=True)
    def _order_is_given(cls, order_columns: list[str]) -> list[str]:
        if not order_columns:
            raise ValueError("order_columns must name the emission order, e.g. [partition, seq]")
        return order_columns

    def rows_query(self) -> str:
        column, previous = _quote(self.column), _alias("previous", self.column)
        window = f"ORDER BY {_columns(self.order_columns)}"
        if self.key_columns:
            window = f"PARTITION BY {_columns(self.key_columns)} {window}"
        previous_order = "".join(
            f", LAG({_quote(c)}) OVER ({window}) AS {_alias('previous', c)}" for c in self.order_columns
        )
        comparison = "<=" if self.strictly else "<"
        return (
            f"SELECT * FROM (SELECT *, LAG({column}) OVER ({window}) AS {previous}{previous_order} "
            f"FROM {{batch}}) WHERE {previous} IS NOT NULL AND {column} {comparison} {previous}"
        )

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        ordered = in_order(batch, self.key_columns, self.order_columns)
        names = list(dict.fromkeys([self.column, *self.order_columns]))
        before = previous(ordered, self.key_columns, names)
        value, last = column(ordered, self.column), before[self.column]
        worse = value <= last if self.strictly else value < last
        flagged = ordered[last.notna() & worse.fillna(False).astype(bool)].copy()
        for name in [self.column, *self.order_columns]:
            flagged[_alias("previous", name).strip("`")] = before.loc[flagged.index, name]
        return flagged


class ExpectTimestampsToNeverGoBackwardsPerKey(ExpectValuesToNeverDecreasePerKey):
    """The project's first promise: per key, in emission order, output timestamps never go backwards."""

    column: str = "timestamp"

    rule_template: ClassVar[str] = (
        "Timestamps ($column) never go backwards per ($key_columns), in ($order_columns) order "
        "(strictly increasing: $strictly)."
    )


class ExpectEmittedAtMostOncePerKeyAndWindow(RowsRuleExpectation):
    """The project's second promise: each (key, window) is emitted at most once. Shows every copy."""

    key_columns: list[str] = ["key"]
    window_columns: list[str] = ["window_start"]

    rule_template: ClassVar[str] = "Each ($key_columns) and window ($window_columns) is emitted at most once."

    _names = pydantic.validator("key_columns", "window_columns", allow_reuse=True)(_check_identifiers)

    def rows_query(self) -> str:
        group = _columns(self.key_columns + self.window_columns)
        return (
            f"SELECT * FROM (SELECT *, COUNT(*) OVER (PARTITION BY {group}) AS `emissions` FROM {{batch}}) "
            f"WHERE `emissions` > 1"
        )

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        keys = row_keys(batch, self.key_columns + self.window_columns)
        counts = Counter(keys)
        emissions = pd.Series([counts[key] for key in keys], index=batch.index, dtype="int64")
        flagged = batch[emissions > 1].copy()
        flagged["emissions"] = emissions[emissions > 1]
        return flagged


class ExpectTimestampsWithinWindow(RowsRuleExpectation):
    """A windowed result's timestamp lies in its window: window_start <= timestamp < window_end."""

    timestamp_column: str = "timestamp"
    window_start_column: str = "window_start"
    window_end_column: str = "window_end"

    rule_template: ClassVar[str] = (
        "$window_start_column <= $timestamp_column < $window_end_column on every row (no nulls)."
    )

    _names = pydantic.validator(
        "timestamp_column", "window_start_column", "window_end_column", allow_reuse=True
    )(_check_identifiers)

    def rows_query(self) -> str:
        ts, start, end = (
            _quote(self.timestamp_column),
            _quote(self.window_start_column),
            _quote(self.window_end_column),
        )
        return (
            f"SELECT * FROM {{batch}} WHERE {ts} IS NULL OR {start} IS NULL OR {end} IS NULL "
            f"OR {ts} < {start} OR {ts} >= {end}"
        )

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        ts, start, end = (
            column(batch, self.timestamp_column),
            column(batch, self.window_start_column),
            column(batch, self.window_end_column),
        )
        return batch[ts.isna() | start.isna() | end.isna() | (ts < start) | (ts >= end)]


class ExpectWindowLengthToEqual(RowsRuleExpectation):
    """Every window is `size_ms` long: window_end - window_start = size_ms."""

    size_ms: IntOrParameter
    window_start_column: str = "window_start"
    window_end_column: str = "window_end"

    rule_template: ClassVar[str] = "$window_end_column - $window_start_column = $size_ms ms on every row."

    _names = pydantic.validator("window_start_column", "window_end_column", allow_reuse=True)(
        _check_identifiers
    )

    def rows_query(self) -> str:
        start, end = _quote(self.window_start_column), _quote(self.window_end_column)
        size = int(self.size_ms)
        return (
            f"SELECT *, {end} - {start} AS `window_length` FROM {{batch}} "
            f"WHERE {start} IS NULL OR {end} IS NULL OR {end} - {start} <> {size}"
        )

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        length = column(batch, self.window_end_column) - column(batch, self.window_start_column)
        flagged = batch[length.isna() | (length != int(self.size_ms))].copy()
        flagged["window_length"] = length[flagged.index]
        return flagged


class ExpectDroppedOnlyAfterWindowCloses(RowsRuleExpectation):
    """Every late record (the `_late` topic) was dropped after its window had closed: window_end + the
    grace of the node that dropped it <= that node's stream time then (docs/semantics.md rule 4.2). A
    record without a window was behind that stream time. A row of a node without a known grace, or
    without a stream time, cannot show it and fails.
    """

    grace_by_node: dict[str, int]

    rule_template: ClassVar[str] = (
        "Each late record was dropped once its window had closed: window_end + the grace of its node "
        "($grace_by_node) <= stream_time."
    )

    def rows_query(self) -> str:
        cases = " ".join(
            f"WHEN '{node.replace(chr(39), chr(39) * 2)}' THEN {int(grace)}"
            for node, grace in sorted(self.grace_by_node.items())
        )
        grace = f"CASE `node` {cases} END" if cases else "CAST(NULL AS BIGINT)"
        return (
            f"SELECT * FROM (SELECT *, {grace} AS `grace_ms` FROM {{batch}}) WHERE `stream_time` IS NULL "
            "OR (`window_end` IS NOT NULL AND (`grace_ms` IS NULL OR `window_end` + `grace_ms` > `stream_time`)) "
            "OR (`window_end` IS NULL AND `timestamp` >= `stream_time`)"
        )

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        grace = column(batch, "node").map(self.grace_by_node).astype("Float64")
        stream_time = column(batch, "stream_time").astype("Float64")
        end = column(batch, "window_end").astype("Float64")
        timestamp = column(batch, "timestamp").astype("Float64")
        windowed = end.notna() & (grace.isna() | (end + grace > stream_time).fillna(True))
        windowless = end.isna() & (timestamp >= stream_time).fillna(True)
        bad = (stream_time.isna() | windowed | windowless).fillna(True).astype(bool)
        flagged = batch[bad].copy()
        flagged["grace_ms"] = grace[bad]
        return flagged


class ExpectTimestampsOnAlignedGrid(RowsRuleExpectation):
    """Timestamps fall on the boundaries k * interval_ms + shift_ms (the shift taken modulo the interval)."""

    interval_ms: IntOrParameter
    shift_ms: IntOrParameter = 0
    timestamp_column: str = "timestamp"

    rule_template: ClassVar[str] = (
        "$timestamp_column lies on the grid k * $interval_ms ms + $shift_ms ms on every row."
    )

    _names = pydantic.validator("timestamp_column", allow_reuse=True)(_check_identifiers)

    def rows_query(self) -> str:
        interval, shift = int(self.interval_ms), int(self.shift_ms)
        if interval < 1:
            raise ValueError(f"interval_ms must be at least 1, got {interval}")
        ts = _quote(self.timestamp_column)
        offset = f"pmod({ts} - {shift % interval}, {interval})"
        return f"SELECT *, {offset} AS `off_grid_by_ms` FROM {{batch}} WHERE {ts} IS NULL OR {offset} <> 0"

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        interval, shift = int(self.interval_ms), int(self.shift_ms)
        if interval < 1:
            raise ValueError(f"interval_ms must be at least 1, got {interval}")
        offset = (column(batch, self.timestamp_column) - shift % interval) % interval  # pmod: never negative
        flagged = batch[offset.isna() | (offset != 0)].copy()
        flagged["off_grid_by_ms"] = offset[flagged.index]
        return flagged


class ExpectColumnValuesToBeNonBlank(RowsRuleExpectation):
    """Every row has a value in `column` that is not null and not only whitespace."""

    column: str

    rule_template: ClassVar[str] = "$column is present and not blank on every row."

    _names = pydantic.validator("column", allow_reuse=True)(_check_identifiers)

    def rows_query(self) -> str:
        column = _quote(self.column)
        return f"SELECT * FROM {{batch}} WHERE {column} IS NULL OR trim(CAST({column} AS STRING)) = ''"

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        values = column(batch, self.column)
        # Spark's trim removes spaces only.
        blank = values.map(lambda v: isinstance(v, str) and v.strip(" ") == "").astype(bool)
        return batch[values.isna() | blank]


class ExpectRowsToAppearInTopic(RowsRuleExpectation):
    """Every row has a match, equal on `columns`, in another topic of the same output.

    The validation job exposes each topic as a temp view (`topic_view_name`); a missing topic makes the
    query fail, and so the rule.
    """

    topic: str
    columns: list[str]

    rule_template: ClassVar[str] = "Every row appears in topic $topic, equal on ($columns)."

    _names = pydantic.validator("columns", allow_reuse=True)(_check_identifiers)

    @pydantic.validator("topic", allow_reuse=True)
    def _topic_name(cls, topic: str) -> str:
        topic_view_name(topic)
        return topic

    @pydantic.validator("columns", allow_reuse=True)
    def _columns_given(cls, columns: list[str]) -> list[str]:
        if not columns:
            raise ValueError("columns must name at least one column to match on")
        return columns

    def rows_query(self) -> str:
        matches = " AND ".join(f"row.{_quote(c)} <=> other.{_quote(c)}" for c in self.columns)
        return (
            f"SELECT row.* FROM {{batch}} AS row LEFT ANTI JOIN `{topic_view_name(self.topic)}` AS other "
            f"ON {matches}"
        )

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        present = set(row_keys(topic_frame(self.topic), self.columns))
        missing = [key not in present for key in row_keys(batch, self.columns)]
        return batch[pd.Series(missing, index=batch.index, dtype=bool)]


class ExpectNoUpdatesAfterWindowCloses(RowsRuleExpectation):
    """No window update is emitted after its window closed (window_end + grace <= the task's time then).

    A task's time when it emits a row is at least the largest timestamp it emitted before (each output's
    timestamp is the maximum of records already seen, docs/semantics.md 4.3), so an update emitted after an
    earlier row of its task reached window_end + grace came from a record that should have been dropped
    as late (rule 4.2). A failing row is shown with that earlier time.
    """

    grace_ms: IntOrParameter
    task_column: str = "partition"
    order_column: str = "seq"

    rule_template: ClassVar[str] = (
        "No update is emitted after its window closed: every earlier row of its task ($task_column, in "
        "$order_column order) has timestamp < window_end + $grace_ms ms."
    )

    _names = pydantic.validator("task_column", "order_column", allow_reuse=True)(_check_identifiers)

    def rows_query(self) -> str:
        task, order, grace = _quote(self.task_column), _quote(self.order_column), int(self.grace_ms)
        return (
            "SELECT * FROM (SELECT *, MAX(`timestamp`) OVER (PARTITION BY "
            f"{task} ORDER BY {order} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS `task_time_before` "
            f"FROM {{batch}}) WHERE `task_time_before` >= `window_end` + {grace}"
        )

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        ordered = in_order(batch, [self.task_column], [self.order_column])
        before = running_max_before(ordered, self.task_column, column(ordered, "timestamp"))
        late = (before >= column(ordered, "window_end") + int(self.grace_ms)).fillna(False).astype(bool)
        flagged = ordered[late].copy()
        flagged["task_time_before"] = before[late]
        return flagged


class ExpectEmittedAfterWindowCloses(RowsRuleExpectation):
    """A suppressed final is emitted only once its window has closed.

    `topic` holds the updates that feed the suppression, written by the same task before the
    suppression sees them; the suppression's time is the largest of their timestamps (docs/semantics.md 5), so
    before a final of window W some earlier update of its task must reach W's end + grace. A failing
    row is shown with the largest earlier update timestamp of its task.
    """

    topic: str
    grace_ms: IntOrParameter
    task_column: str = "partition"
    order_column: str = "seq"

    rule_template: ClassVar[str] = (
        "Emitted only after the window closed: an earlier row of topic $topic in the same task "
        "($task_column, $order_column order) has timestamp >= window_end + $grace_ms ms."
    )

    _names = pydantic.validator("task_column", "order_column", allow_reuse=True)(_check_identifiers)

    @pydantic.validator("topic", allow_reuse=True)
    def _topic_name(cls, topic: str) -> str:
        topic_view_name(topic)
        return topic

    def rows_query(self) -> str:
        task, order, grace = _quote(self.task_column), _quote(self.order_column), int(self.grace_ms)
        # One pass per task over updates and finals in emission order (no quadratic range join).
        return (
            f"WITH emissions AS (SELECT {task} AS task, {order} AS position, `timestamp` AS update_time, "
            f"false AS is_row FROM `{topic_view_name(self.topic)}` "
            f"UNION ALL SELECT {task}, {order}, CAST(NULL AS BIGINT), true FROM {{batch}}), "
            "timed AS (SELECT task, position, is_row, MAX(update_time) OVER (PARTITION BY task "
            "ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS task_time_before "
            "FROM emissions) "
            "SELECT row.*, timed.task_time_before FROM {batch} AS row JOIN timed "
            f"ON timed.is_row AND timed.task = row.{task} AND timed.position = row.{order} "
            f"WHERE timed.task_time_before IS NULL OR timed.task_time_before < row.`window_end` + {grace}"
        )

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        task, order = self.task_column, self.order_column
        updates = topic_frame(self.topic)
        emissions = pd.concat(
            [
                pd.DataFrame(
                    {
                        "task": column(updates, task).to_numpy(),
                        "position": column(updates, order).to_numpy(),
                        "update_time": column(updates, "timestamp").astype("float64").to_numpy(),
                        "row": -1,
                    }
                ),
                pd.DataFrame(
                    {
                        "task": column(batch, task).to_numpy(),
                        "position": column(batch, order).to_numpy(),
                        "update_time": float("nan"),
                        "row": range(len(batch)),
                    }
                ),
            ],
            ignore_index=True,
        )
        timed = in_order(emissions, ["task"], ["position"])
        before = running_max_before(timed, "task", timed["update_time"])
        rows = timed["row"] >= 0
        task_known = timed["task"].notna()
        before_row = pd.Series(float("nan"), index=range(len(batch)))
        before_row[timed.loc[rows & task_known, "row"].to_numpy()] = before[rows & task_known].to_numpy()
        end = column(batch, "window_end").to_numpy()
        early = before_row.isna() | (before_row < end + int(self.grace_ms))
        # A row whose task or position is null joins no timed emission in SQL, so is never selected.
        early &= pd.Series((column(batch, task).notna() & column(batch, order).notna()).to_numpy())
        flagged = batch[early.to_numpy()].copy()
        flagged["task_time_before"] = before_row[early].to_numpy()
        return flagged


class ExpectNothingLaterInTopic(RowsRuleExpectation):
    """Nothing in `topic` matching a row on `columns` comes later in the same task: the row is the last
    word, e.g. no update of a window after its final."""

    topic: str
    columns: list[str]
    task_column: str = "partition"
    order_column: str = "seq"

    rule_template: ClassVar[str] = (
        "No row of topic $topic with the same ($columns) comes later in the same task "
        "($task_column, $order_column order)."
    )

    _names = pydantic.validator("columns", "task_column", "order_column", allow_reuse=True)(
        _check_identifiers
    )

    @pydantic.validator("topic", allow_reuse=True)
    def _topic_name(cls, topic: str) -> str:
        topic_view_name(topic)
        return topic

    def rows_query(self) -> str:
        task, order = _quote(self.task_column), _quote(self.order_column)
        matches = "".join(f" AND row.{_quote(c)} <=> other.{_quote(c)}" for c in self.columns)
        return (
            f"SELECT row.* FROM {{batch}} AS row LEFT SEMI JOIN `{topic_view_name(self.topic)}` AS other "
            f"ON other.{task} = row.{task} AND other.{order} > row.{order}{matches}"
        )

    def flagged_rows(self, batch: pd.DataFrame) -> pd.DataFrame:
        task, order = self.task_column, self.order_column
        other = topic_frame(self.topic)
        other = other[column(other, task).notna() & column(other, order).notna()]
        last: dict[tuple, Any] = {}
        for key, position in zip(
            row_keys(other, [task, *self.columns]), column(other, order).tolist(), strict=True
        ):
            if key not in last or position > last[key]:
                last[key] = position
        later = [
            position is not None and position == position and key in last and last[key] > position
            for key, position in zip(
                row_keys(batch, [task, *self.columns]), column(batch, order).tolist(), strict=True
            )
        ]
        return batch[pd.Series(later, index=batch.index, dtype=bool)]


CUSTOM_EXPECTATIONS = (
    ExpectValuesToNeverDecreasePerKey,
    ExpectTimestampsToNeverGoBackwardsPerKey,
    ExpectEmittedAtMostOncePerKeyAndWindow,
    ExpectTimestampsWithinWindow,
    ExpectWindowLengthToEqual,
    ExpectTimestampsOnAlignedGrid,
    ExpectColumnValuesToBeNonBlank,
    ExpectRowsToAppearInTopic,
    ExpectNoUpdatesAfterWindowCloses,
    ExpectEmittedAfterWindowCloses,
    ExpectNothingLaterInTopic,
)
