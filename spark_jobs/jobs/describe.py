"""What a job computes, as Markdown for its pipeline DAG's page: its topology drawn as a graph and the
quality rules each output topic is checked against.

Airflow's UI renders a DAG's `doc_md` with react-markdown, HTML skipped and only http(s) links and images
kept: no Mermaid, no inline SVG, no data-URI image. So the graph is text in a fenced block, drawn from the
topology as Kafka's topology visualizers draw `Topology.describe()`: topics, sources, processors with their
stores, and sinks, each node under its parent (a node with several parents is drawn under the first, and
named under the others).
"""

from __future__ import annotations

import json
from typing import Any

from spark_jobs.spark.job import JobSpec

# The store a node keeps, by its class (as Node.state_rows names them); a user processor keeps its
# attributes. A node class not listed here and without state_rows keeps none.
STORE_KINDS = {
    "TimeWindowAggregateNode": "window",
    "DeclaredWindowAggregateNode": "window",
    "SlidingWindowAggregateNode": "window",
    "SessionWindowAggregateNode": "session",
    "StreamAggregateNode": "key_value",
    "DeclaredStreamAggregateNode": "key_value",
    "TableAggregateNode": "table",
    "TableSourceNode": "table",
    "SuppressNode": "suppress_buffer",
    "StreamStreamJoinNode": "join_window",
}


def _node_lines(spec, node) -> tuple[str, str | None]:
    """A node's line, and the line below it: its kind and store, or a sink's topic (None: no such line).
    Two lines keep the graph narrow: Airflow shows the documentation in a narrow dialog."""
    from spark_jobs.streams.nodes.base import Node, UserProcessorNode

    if spec.kind == "source":
        return f"Source: {spec.name}", None
    if spec.kind == "sink":
        return f"Sink: {spec.name}", f"─▶ ({spec.sink_topic})"
    if isinstance(node, UserProcessorNode):
        return spec.name, f"[{type(node.processor).__name__}; state: its attributes]"
    kind = type(node).__name__
    table = getattr(node, "table_name", None)  # a join that looks a table's store up (Kafka draws the link)
    if table is not None:
        return spec.name, f"[{kind.removesuffix('Node')}; looks up {table}]"
    store = STORE_KINDS.get(kind)
    if store is None and type(node).state_rows is not Node.state_rows:
        store = "state"
    return spec.name, f"[{kind.removesuffix('Node')}; store: {store}]" if store else None


def topology_diagram(topology) -> str:
    """The topology as a text graph: each input topic, its source, and every node below its parent."""
    specs = topology.specs
    drawn: set[str] = set()
    lines: list[str] = []

    def draw(name: str, prefix: str, last: bool) -> None:
        spec = specs[name]
        branch = "└─▶ " if last else "├─▶ "
        if name in drawn:
            lines.append(f"{prefix}{branch}{name}  (drawn above)")
            return
        drawn.add(name)
        label, detail = _node_lines(spec, spec.factory())
        lines.append(prefix + branch + label)
        below = prefix + ("    " if last else "│   ")
        if detail is not None:
            lines.append(below + ("│ " if spec.children else "  ") + detail)
        for i, child in enumerate(spec.children):
            draw(child, below, i == len(spec.children) - 1)

    for spec in specs.values():
        if spec.kind != "source":
            continue
        if lines:
            lines.append("")
        lines.append(", ".join(f"({topic})" for topic in spec.topics))
        draw(spec.name, " ", True)
    return "\n".join(lines)


def _rule_text(rule: dict[str, Any]) -> str:
    kwargs = ", ".join(f"{k}={json.dumps(v)}" for k, v in rule["kwargs"].items())
    return f"`{rule['type']}({kwargs})`"


def rules_markdown(spec: JobSpec) -> str:
    """Per output topic: the rules derived from the topology (with `spec`'s options) and the job's own."""
    from spark_jobs.quality.derived import handwritten_rules, promise_rules, shape_rules
    from spark_jobs.streams.guarantees import topic_promises

    promises = topic_promises(spec.topology())
    written = handwritten_rules(spec)
    lines = ["- every output topic: " + ", ".join(_rule_text(rule) for rule in shape_rules())]
    for topic in spec.topic_schemas:
        derived = [rule for promise in promises.get(topic, []) for rule in promise_rules(promise)]
        own = written.get(topic, [])
        lines.append(
            f"- `{topic}`: derived from the topology: {', '.join(map(_rule_text, derived)) or 'none'}; "
            f"the job's own: {', '.join(map(_rule_text, own)) or 'none'}"
        )
    return "\n".join(lines)


def job_markdown(module: str) -> str:
    """The job's topology (with its default options) and its quality rules, as Markdown sections."""
    spec = JobSpec(module)
    return f"""
#### Topology

Input topics (in parentheses) feed sources; each processor feeds the nodes below it (a stateful one
with its kind and store in brackets); sinks write output topics. Built with the default options.

```text
{topology_diagram(spec.topology())}
```

#### Quality rules per output topic

Checked by Great Expectations after every run (`python -m spark_jobs.quality.validate`), with the options
the run used.

{rules_markdown(spec)}
"""
