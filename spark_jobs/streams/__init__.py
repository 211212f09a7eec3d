"""Kafka Streams' Processor API, DSL, punctuation and Suppress in pure Python.

Semantics: docs/semantics.md. Layers: this module is the public API; dsl/ holds the DSL builders
(StreamsBuilder, KStream, KTable, ...); runtime/ the StreamTask (docs/TASK_INTERFACE.md), which the
TopologyTestDriver, the Spark runtime and the benchmarks all use, its punctuation and the TaskContext its
nodes see; nodes/ the processor nodes a task wires together.
"""

from .aggregates import Count, Max, Mean, Min, Sum
from .dsl import KGroupedStream, KGroupedTable, KStream, KTable, StreamsBuilder, WindowedKStream
from .processor import Cancellable, Processor, ProcessorContext, PunctuationType
from .records import Record, To, Window, Windowed
from .runtime.task import OutputBatch, StateExport, StreamTask
from .suppress import BufferConfig, BufferFullError, Suppressed
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
    "StateExport",
    "KStream",
    "KTable",
    "KGroupedStream",
    "KGroupedTable",
    "WindowedKStream",
    "Count",
    "Sum",
    "Min",
    "Max",
    "Mean",
]
