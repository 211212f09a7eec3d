"""The Processor API: user processors, their context, punctuation types and cancellable schedules."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .records import Record, To
from .timeutil import Duration

if TYPE_CHECKING:
    from .nodes.base import ForwardBuffer, UserProcessorNode


class PunctuationType(enum.Enum):
    STREAM_TIME = "STREAM_TIME"
    WALL_CLOCK_TIME = "WALL_CLOCK_TIME"


class Cancellable:
    """Returned by `ProcessorContext.schedule`; `cancel()` stops the schedule, also from inside its punctuator."""

    __slots__ = ()

    def cancel(self) -> None:
        raise NotImplementedError


class Processor:
    """A user processor. Subclass it and override `init`, `process` and (optionally) `close`.

    A supplier is a zero-argument callable returning a new Processor; every task gets its own instances.

    State and restarts (`StreamTask.snapshot()` / `StreamTask.restore()`): on restore the engine builds a
    fresh processor from the supplier, calls `init(context)` (which must re-create its schedules, in the
    same order as the first time), then puts back each schedule's due time and cancelled flag by creation
    index, and finally the processor's state:

    - by default the state is the instance `__dict__` minus attributes holding the context or Cancellable
      objects (those keep what `init` just set); every other attribute must be picklable;
    - or define `snapshot_state() -> picklable` and `restore_state(state)` to control it yourself.

    Schedules created after `init` survive a restore only if their punctuator is a bound method of the
    processor (it is re-bound by name); other late schedules make `snapshot()` raise.

    A forwarded record's key, value and headers belong to the nodes below from then on: do not change
    those objects afterwards (forward a new object instead). The task may run the nodes below over a
    batch of forwards after `process` has seen the batch (runtime/task.py), and writes sinks' rows as
    they are when the output is drained.
    """

    def init(self, context: ProcessorContext) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def promised_timestamp_grid(self) -> tuple[int, int] | None:
        """`(interval, shift)` when every record this processor forwards is stamped on the grid
        `k * interval + shift` (e.g. by aligned punctuation); None (the default): no such promise.
        Data-quality checks derive a rule from it (spark_jobs.streams.guarantees)."""
        return None


class ProcessorContext:
    """What a processor sees of its task: forwarding, schedules and the clocks."""

    __slots__ = ("_node", "_held")

    def __init__(self, node: UserProcessorNode) -> None:
        self._node = node
        # The node's `ForwardBuffer` while the task holds its forwards (UserProcessorNode.forwards), else None.
        self._held: ForwardBuffer | None = None

    def forward(self, record: Record, to: To | str | None = None) -> None:
        """Send `record` to all children (`to=None` / `To.all()`) or to one child by name.

        The record keeps its timestamp; `to.with_timestamp(ts)` overrides it for this call only; a record
        whose timestamp is None gets the current time (the input record's, or the punctuation's `now`).
        """
        held = self._held
        if held is not None and to is None and type(record) is Record and record[2] is not None:
            held.add(record, None)  # to every child, with its own (valid) timestamp: held as it is
            return
        self._node.forward(record, to)

    def schedule(
        self,
        interval: Duration,
        punctuation_type: PunctuationType,
        punctuator: Callable[[int], Any],
        time_shift: Duration | None = None,
    ) -> Cancellable:
        """Call `punctuator(now)` every `interval`; aligned to `k * interval + time_shift` when a shift is given."""
        return self._node.task_context.schedule(
            self._node.name, interval, punctuation_type, punctuator, time_shift
        )

    def stream_time(self) -> int:
        """The task's stream time (max valid record timestamp so far, -1 while unknown)."""
        return self._node.task_context.stream_time

    def wall_clock_time(self) -> int:
        return self._node.task_context.wall_clock

    def timestamp(self) -> int:
        """The timestamp of the record being processed, or the punctuation's `now` inside a punctuator."""
        return self._node.current_timestamp

    def topic(self) -> str | None:
        """The input topic of the record being processed (None inside a punctuator)."""
        return self._node.task_context.current_topic

    def partition(self) -> int:
        return self._node.task_context.partition

    def processor_name(self) -> str:
        return self._node.name

    def child_names(self) -> list[str]:
        return [child.name for child in self._node.children]
