"""Rewrites of a task's nodes, chosen when the task wires them (StreamTask's batch path).

A rewrite runs a chain of nodes over a batch as one step, built from the same store operations the nodes
use, with the same outputs, state and metrics as the nodes one after the other. The task asks for them
once, by node name, and runs a rewrite's `process_columns` in place of the chain's first node, feeding
its output to the children of the chain's last node (`output`).

- A windowed count whose only child is an unbounded final suppress (nodes/final_window_count.py): a
  batch's (record, window) pairs are counted in numpy and only the entries that leave the buffer are
  built as Python objects.
- A windowed declared aggregation whose only child is an unbounded final suppress
  (nodes/final_window_aggregate.py): its values stay numpy columns, and only the entries the buffer keeps
  are built as value dicts.
- A windowed user aggregate or reduce whose only child is an unbounded final suppress
  (nodes/final_window_user_aggregate.py): the count's plan, each (window, key) group's values folded by the
  user's functions in one loop, the store and the buffer written once per group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from .nodes.base import Node
from .nodes.final_window_aggregate import final_window_aggregate
from .nodes.final_window_count import final_window_count
from .nodes.final_window_user_aggregate import final_window_user_aggregate


class Rewrite(NamedTuple):
    output: Node  # the chain's last node: its children receive the rewrite's output
    process_columns: Callable


def rewrites(nodes: Mapping[str, Node]) -> dict[str, Rewrite]:
    """The rewrites of a task's nodes, by the name of the first node of each chain."""
    chosen: dict[str, Rewrite] = {}
    for name, node in nodes.items():
        fused = final_window_count(node) or final_window_aggregate(node) or final_window_user_aggregate(node)
        if fused is not None:
            chosen[name] = Rewrite(fused.suppress, fused.process_columns)
    return chosen
