"""Kafka Streams' Processor API, DSL, punctuation and Suppress in pure Python.

Semantics: docs/semantics.md. Runtime: `task.StreamTask` (docs/TASK_INTERFACE.md), which the
TopologyTestDriver, the Spark runtime and the benchmark all use.
"""

from .dsl import KGroupedStream, KGroupedTable, KStream, KTable, StreamsBuilder, WindowedKStream
from .processor import Cancellable, Processor, ProcessorContext, PunctuationType
from .records import Record, To, Window, Windowed
from .suppress import BufferConfig, BufferFullError, Suppressed
from .task import OutputBatch, StreamTask
from .testing import TopologyTestDriver
from .timeutil import next_aligned
from .topology import Topology
from .windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows

__all__ = [
    "StreamsBuilder",
    "Topology",
    "TopologyTestDriver",
    "Processor",
    "ProcessorContext",
    "Record",
    "To",
    "PunctuationType",
    "Cancellable",
    "TimeWindows",
    "SessionWindows",
    "SlidingWindows",
    "JoinWindows",
    "Window",
    "Windowed",
    "Suppressed",
    "BufferConfig",
    "BufferFullError",
    "next_aligned",
    "StreamTask",
    "OutputBatch",
    "KStream",
    "KTable",
    "KGroupedStream",
    "KGroupedTable",
    "WindowedKStream",
]
