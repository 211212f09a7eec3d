"""The DSL: StreamsBuilder, KStream, KTable and their grouped and windowed forms."""

from .builder import StreamsBuilder
from .grouped import KGroupedStream, KGroupedTable, WindowedKStream
from .kstream import KStream
from .ktable import KTable

__all__ = ["StreamsBuilder", "KStream", "KTable", "KGroupedStream", "KGroupedTable", "WindowedKStream"]
