"""Punctuation schedules (docs/semantics.md section 2): legacy and aligned, on stream time and wall clock."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from ..processor import Cancellable, PunctuationType
from ..timeutil import INT64_MAX, Duration, next_aligned, normalize_shift, to_millis


class PunctuationSchedule(Cancellable):
    """One schedule. `due` is the next time it fires; None while it waits for the first record (aligned
    STREAM_TIME scheduled before stream time was known) or once its next boundary lies beyond int64."""

    __slots__ = (
        "manager",
        "index",
        "node_name",
        "type",
        "interval",
        "shift",
        "due",
        "cancelled",
        "punctuator",
        "awaiting_first_record",
    )

    def __init__(
        self,
        manager: Any,
        index: int,
        node_name: str,
        type_: PunctuationType,
        interval: int,
        shift: int | None,
        due: int | None,
        punctuator: Callable[[int], Any],
    ) -> None:
        self.manager = (
            manager  # counts changes, so a task batching records notices new or cancelled schedules
        )
        self.index = index
        self.node_name = node_name
        self.type = type_
        self.interval = interval
        self.shift = shift
        self.due = due
        self.cancelled = False
        self.punctuator = punctuator
        self.awaiting_first_record = False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            if self.manager is not None:
                self.manager.version += 1

    def advance_past(self, now: int) -> None:
        """Move `due` to the smallest boundary of its grid strictly greater than `now` (missed ones collapse)."""
        due = self.due
        assert due is not None
        missed = (now - due) // self.interval if now >= due else -1
        nxt = due + (missed + 1) * self.interval
        self.due = nxt if nxt <= INT64_MAX else None  # no int64 clock can reach it: the schedule is spent

    def __repr__(self) -> str:
        return (
            f"PunctuationSchedule(#{self.index} {self.node_name} {self.type.value} every {self.interval} "
            f"shift={self.shift} due={self.due} cancelled={self.cancelled})"
        )


class PunctuationQueue:
    """Schedules of one punctuation type, fired in order of due time, then creation."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, PunctuationSchedule]] = []

    def add(self, schedule: PunctuationSchedule) -> None:
        if schedule.due is not None and not schedule.cancelled:
            heapq.heappush(self._heap, (schedule.due, schedule.index, schedule))

    def next_due(self) -> int | None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def clear(self) -> None:
        self._heap.clear()

    def maybe_punctuate(self, now: int, fire: Callable[[PunctuationSchedule, int], None]) -> bool:
        """Fire every schedule due at `now` once (Kafka's PunctuationQueue.mayPunctuate)."""
        heap = self._heap
        punctuated = False
        while heap and heap[0][0] <= now:
            _, _, schedule = heapq.heappop(heap)
            if schedule.cancelled:
                continue
            fire(schedule, now)
            punctuated = True
            if not schedule.cancelled:  # a punctuator may cancel its own schedule
                schedule.advance_past(now)
                self.add(schedule)
        return punctuated


class PunctuationManager:
    """All schedules of a task, in creation order (the order that identifies them across restores)."""

    def __init__(self, clocks: Any, fire: Callable[[PunctuationSchedule, int], None]) -> None:
        self.clocks = clocks  # stream_time and wall_clock (the task's TaskContext)
        self.fire = fire
        self.schedules: list[PunctuationSchedule] = []
        self.stream_queue = PunctuationQueue()
        self.wall_queue = PunctuationQueue()
        self._awaiting_first_record: list[PunctuationSchedule] = []
        self.init_count = 0  # schedules created by init(): the ones a restore re-creates by calling init()
        self.version = 0  # bumped by every new or cancelled schedule

    def schedule(
        self,
        node_name: str,
        interval: Duration,
        punctuation_type: PunctuationType,
        punctuator: Callable[[int], Any],
        time_shift: Duration | None = None,
    ) -> PunctuationSchedule:
        interval_ms = to_millis(interval, "interval")
        if interval_ms < 1:
            raise ValueError(f"punctuation interval must be at least 1 ms, got {interval_ms}")
        if not isinstance(punctuation_type, PunctuationType):
            raise ValueError(f"punctuation_type must be a PunctuationType, got {punctuation_type!r}")
        if not callable(punctuator):
            raise ValueError("punctuator must be callable as punctuator(timestamp)")
        shift = (
            None if time_shift is None else normalize_shift(interval_ms, to_millis(time_shift, "time_shift"))
        )
        self.version += 1
        schedule = PunctuationSchedule(
            self, len(self.schedules), node_name, punctuation_type, interval_ms, shift, None, punctuator
        )
        clocks = self.clocks
        if punctuation_type is PunctuationType.STREAM_TIME:
            if shift is None:
                schedule.due = 0  # Kafka: fires right after the first valid record
            elif clocks.stream_time >= 0:
                schedule.due = _clamp(next_aligned(clocks.stream_time, interval_ms, shift))
            else:
                schedule.awaiting_first_record = True
                self._awaiting_first_record.append(schedule)
            self.stream_queue.add(schedule)
        else:
            now = clocks.wall_clock
            due = now + interval_ms if shift is None else next_aligned(now, interval_ms, shift)
            schedule.due = _clamp(due)
            self.wall_queue.add(schedule)
        self.schedules.append(schedule)
        return schedule

    def stream_time_known(self, stream_time: int) -> None:
        """Aligned STREAM_TIME schedules made before any record start on the first record's grid boundary."""
        if self._awaiting_first_record:
            for schedule in self._awaiting_first_record:
                schedule.awaiting_first_record = False
                schedule.due = _clamp(next_aligned(stream_time, schedule.interval, schedule.shift))
                self.stream_queue.add(schedule)
            self._awaiting_first_record.clear()

    @property
    def awaiting_first_record(self) -> bool:
        return bool(self._awaiting_first_record)

    def next_stream_due(self) -> int | None:
        return self.stream_queue.next_due()

    def punctuate_stream_time(self, stream_time: int) -> bool:
        if stream_time < 0:
            return False
        return self.stream_queue.maybe_punctuate(stream_time, self.fire)

    def punctuate_wall_clock(self, wall_clock: int) -> bool:
        return self.wall_queue.maybe_punctuate(wall_clock, self.fire)

    # -- snapshot -----------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, list[Any]]:
        schedules = self.schedules
        methods = [_bound_method_name(s.punctuator) for s in schedules]
        for s, method in zip(schedules[self.init_count :], methods[self.init_count :], strict=False):
            if method is None:
                raise ValueError(
                    f"cannot snapshot {s!r}: it was created after init() with a punctuator that is "
                    "not a method of its processor, so a restore could not re-create it"
                )
        return {
            "method": methods,
            "node": [s.node_name for s in schedules],
            "type": [s.type.value for s in schedules],
            "interval": [s.interval for s in schedules],
            "shift": [s.shift for s in schedules],
            "due": [s.due for s in schedules],
            "cancelled": [s.cancelled for s in schedules],
            "awaiting": [s.awaiting_first_record for s in schedules],
        }

    def restore(
        self, state: dict[str, list[Any]], rebind: Callable[[str, str], Callable[[int], Any]]
    ) -> None:
        """Overwrite the schedules that init() re-created (same creation order) with their saved progress;
        schedules made after init() are re-created from their processor's method, `rebind(node, name)`."""
        count = len(state["due"])
        if count < len(self.schedules):
            raise ValueError(
                f"snapshot has {count} punctuation schedules but init() created "
                f"{len(self.schedules)}; schedules must be created in init() in a fixed order"
            )
        for i in range(len(self.schedules), count):
            type_ = PunctuationType(state["type"][i])
            self.schedules.append(
                PunctuationSchedule(
                    self,
                    i,
                    state["node"][i],
                    type_,
                    state["interval"][i],
                    state["shift"][i],
                    None,
                    rebind(state["node"][i], state["method"][i]),
                )
            )
        self.stream_queue.clear()
        self.wall_queue.clear()
        self._awaiting_first_record.clear()
        for i, schedule in enumerate(self.schedules):
            if (schedule.node_name, schedule.type.value, schedule.interval) != (
                state["node"][i],
                state["type"][i],
                state["interval"][i],
            ):
                raise ValueError(f"punctuation schedule #{i} does not match the snapshot: {schedule!r}")
            schedule.due = state["due"][i]
            schedule.cancelled = state["cancelled"][i]
            schedule.awaiting_first_record = state["awaiting"][i]
            if schedule.cancelled:
                continue
            if schedule.awaiting_first_record:
                self._awaiting_first_record.append(schedule)
            elif schedule.type is PunctuationType.STREAM_TIME:
                self.stream_queue.add(schedule)
            else:
                self.wall_queue.add(schedule)


def _bound_method_name(punctuator: Any) -> str | None:
    self_ = getattr(punctuator, "__self__", None)
    if self_ is None or getattr(punctuator, "__func__", None) is None:
        return None
    return punctuator.__name__


def _clamp(due: int) -> int | None:
    """A first due time beyond int64 can never be reached: the schedule never fires."""
    return due if due <= INT64_MAX else None
