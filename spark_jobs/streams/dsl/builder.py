"""StreamsBuilder: the entry point of the DSL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..nodes.base import Node
from ..topology import Topology

if TYPE_CHECKING:
    from .kstream import KStream
    from .ktable import KTable


class StreamsBuilder:
    """Builds a Topology with the DSL: `stream(topic)`, `table(topic)`, then `build()`.

    Every DSL call adds its nodes at once, so misuse raises ValueError where it is written.
    """

    def __init__(self) -> None:
        self.topology = Topology()
        self._next_index = 0

    def new_name(self, prefix: str) -> str:
        """Kafka-style generated node names: PREFIX-0000000007."""
        name = f"{prefix}-{self._next_index:010d}"
        self._next_index += 1
        return name

    def add_node(
        self,
        prefix_or_name: str,
        factory: Callable[[str], Node],
        parents: Sequence[str],
        explicit_name: bool = False,
        reads_values: bool = True,
    ) -> str:
        name = prefix_or_name if explicit_name else self.new_name(prefix_or_name)
        self.topology._add_node(name, lambda: factory(name), tuple(parents), reads_values)
        return name

    def stream(self, topic: str | Sequence[str]) -> KStream:
        from .kstream import KStream

        topics = (topic,) if isinstance(topic, str) else tuple(topic)
        name = self.new_name("KSTREAM-SOURCE")
        self.topology.add_source(name, *topics)
        return KStream(self, name)

    def table(self, topic: str) -> KTable:
        from ..nodes.operators import TableSourceNode
        from .ktable import KTable

        source = self.new_name("KSTREAM-SOURCE")
        self.topology.add_source(source, topic)
        name = self.add_node("KTABLE-SOURCE", TableSourceNode, [source])
        return KTable(self, name)

    def build(self) -> Topology:
        self.topology.validate()
        return self.topology
