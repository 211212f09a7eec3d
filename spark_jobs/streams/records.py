"""The values that travel through a topology: records, forwarding targets and windowed keys."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from .timeutil import to_millis


class Record(tuple):
    """An immutable record: key, value, event timestamp (epoch ms) and optional headers.

    A `timestamp` of None means "not set": `ProcessorContext.forward` then stamps the record with the
    context's current time (the input record's timestamp, or the punctuation's `now`).
    A tuple underneath: the engine makes one per record for user processors, and tuples are cheap.
    """

    __slots__ = ()

    def __new__(cls, key: Any, value: Any, timestamp: int | None = None, headers: Any = None) -> Record:
        if timestamp is not None and timestamp < 0:
            raise ValueError(f"a record timestamp must not be negative, got {timestamp}")
        return tuple.__new__(cls, (key, value, timestamp, headers))

    key = property(itemgetter(0))
    value = property(itemgetter(1))
    timestamp = property(itemgetter(2))
    headers = property(itemgetter(3))

    def with_key(self, key: Any) -> Record:
        return _new_record(Record, (key, self[1], self[2], self[3]))

    def with_value(self, value: Any) -> Record:
        return _new_record(Record, (self[0], value, self[2], self[3]))

    def with_timestamp(self, timestamp: int) -> Record:
        return Record(self[0], self[1], timestamp, self[3])

    def with_headers(self, headers: Any) -> Record:
        return _new_record(Record, (self[0], self[1], self[2], headers))

    def __hash__(self) -> int:  # headers may be a dict
        return hash((self[0], self[1], self[2]))

    def __repr__(self) -> str:
        extra = f", headers={self[3]!r}" if self[3] is not None else ""
        return f"Record(key={self[0]!r}, value={self[1]!r}, timestamp={self[2]!r}{extra})"

    def __getnewargs__(self) -> tuple[Any, Any, int | None, Any]:
        return tuple(self)  # type: ignore[return-value]


_new_record = tuple.__new__


def make_record(key: Any, value: Any, timestamp: int, headers: Any) -> Record:
    """A Record without validation, for the engine's own (already valid) rows."""
    return _new_record(Record, (key, value, timestamp, headers))


class To:
    """Where `ProcessorContext.forward` sends a record: one child by name, or all children.

    `with_timestamp(ts)` stamps the forwarded record for this one forward call only.
    """

    __slots__ = ("child_name", "timestamp")

    def __init__(self, child_name: str | None, timestamp: int | None = None) -> None:
        self.child_name = child_name
        self.timestamp = timestamp

    @classmethod
    def child(cls, name: str) -> To:
        return cls(name)

    @classmethod
    def all(cls) -> To:
        return cls(None)

    def with_timestamp(self, timestamp: int) -> To:
        if timestamp < 0:
            raise ValueError(f"an explicit forward timestamp must not be negative, got {timestamp}")
        return To(self.child_name, timestamp)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, To) and (self.child_name, self.timestamp) == (
            other.child_name,
            other.timestamp,
        )

    def __hash__(self) -> int:
        return hash((self.child_name, self.timestamp))

    def __repr__(self) -> str:
        return f"To(child={self.child_name!r}, timestamp={self.timestamp!r})"


# Window and Windowed are tuple subclasses: they are dictionary keys on the hot path (suppress buffers,
# window stores), where tuple hashing and equality run in C.
class Window(tuple):
    """A window `[start, end)` (time windows) or `[start, end]` (session and sliding windows)."""

    __slots__ = ()

    def __new__(cls, start: int, end: int) -> Window:
        if end < start:
            raise ValueError(f"window end {end} is before its start {start}")
        return tuple.__new__(cls, (start, end))

    @property
    def start(self) -> int:
        return self[0]

    @property
    def end(self) -> int:
        return self[1]

    def overlap(self, other: Window) -> bool:
        return self[0] < other[1] and other[0] < self[1]

    def __repr__(self) -> str:
        return f"Window(start={self[0]}, end={self[1]})"

    def __getnewargs__(self) -> tuple[int, int]:
        return (self[0], self[1])


class Windowed(tuple):
    """A key together with its window; `str()` is Kafka's `[key@start/end]`."""

    __slots__ = ()

    def __new__(cls, key: Any, window: Window) -> Windowed:
        if not isinstance(window, Window):
            window = Window(*window)
        return tuple.__new__(cls, (key, window))

    @property
    def key(self) -> Any:
        return self[0]

    @property
    def window(self) -> Window:
        return self[1]

    def __str__(self) -> str:
        return f"[{self[0]}@{self[1][0]}/{self[1][1]}]"

    def __repr__(self) -> str:
        return f"Windowed(key={self[0]!r}, window={self[1]!r})"

    def __getnewargs__(self) -> tuple[Any, Window]:
        return (self[0], self[1])


def make_windowed(key: Any, start: int, end: int) -> Windowed:
    """Build a Windowed key without the validation of the public constructors (engine-internal)."""
    return tuple.__new__(Windowed, (key, tuple.__new__(Window, (start, end))))


def duration_ms(value: Any, name: str) -> int:
    """A duration argument (int ms or timedelta) as milliseconds, with a clear error for other types."""
    return to_millis(value, name)
