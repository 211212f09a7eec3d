"""What a pipeline DAG's page says the job computes: its topology drawn as text, its quality rules."""

from __future__ import annotations

import re

from spark_jobs.jobs.describe import job_markdown, rules_markdown, topology_diagram
from spark_jobs.quality.derived import promise_rules, shape_rules
from spark_jobs.spark.job import JobSpec
from spark_jobs.streams.guarantees import topic_promises

SENSOR_ALERTS = "spark_jobs.jobs.sensor_alerts"
ENRICHMENT = "spark_jobs.jobs.sensor_enrichment"


def _drawn(diagram: str) -> list[str]:
    """The node names the diagram draws (not those it refers back to), in order."""
    names = []
    for line in diagram.splitlines():
        match = re.search(r"[├└]─▶ (?:Source: |Sink: )?(\S+)", line)
        if match and not line.endswith("(drawn above)"):
            names.append(match.group(1))
    return names


def test_every_node_is_drawn_once_below_its_parent():
    topology = JobSpec(SENSOR_ALERTS).topology()
    diagram = topology_diagram(topology)
    assert sorted(_drawn(diagram)) == sorted(topology.specs)
    lines = diagram.splitlines()
    assert lines[0] == "(sensor-readings)" and lines[1] == " └─▶ Source: KSTREAM-SOURCE-0000000000"
    for spec in topology.specs.values():
        if spec.kind == "sink":  # its topic on the line below
            (at,) = [i for i, line in enumerate(lines) if line.endswith(f"Sink: {spec.name}")]
            assert lines[at + 1].endswith(f"  ─▶ ({spec.sink_topic})")
    # a child sits one level deeper than its parent, and after it
    depth = {name: next(i for i, line in enumerate(lines) if f" {name}" in line) for name in topology.specs}
    for spec in topology.specs.values():
        for parent in spec.parents:
            assert depth[parent] < depth[spec.name]
    # a stateful node's kind and store on the line below it, stateless ones without
    assert "─▶ KSTREAM-AGGREGATE-0000000001\n     │   │ [TimeWindowAggregate; store: window]\n" in diagram
    assert "─▶ window-finals-buffer\n     │       │ [Suppress; store: suppress_buffer]\n" in diagram
    assert "─▶ KSTREAM-PROCESSOR-0000000010\n         │ [SilenceDetector; state: its attributes]" in diagram
    assert "─▶ KSTREAM-FILTER-0000000006\n     │               └─▶ Sink" in diagram


def test_a_node_of_several_parents_is_drawn_under_the_first_and_named_under_the_others():
    topology = JobSpec(ENRICHMENT).topology()
    diagram = topology_diagram(topology)
    assert sorted(_drawn(diagram)) == sorted(topology.specs)
    merges = [name for name, spec in topology.specs.items() if len(spec.parents) > 1]
    assert merges
    for name in merges:
        assert diagram.count(f"{name}  (drawn above)") == len(topology.specs[name].parents) - 1
    assert "[StreamTableJoin; looks up KTABLE-SOURCE-0000000003]" in diagram
    assert [line for line in diagram.splitlines() if line.startswith("(")] == [
        f"({topic})" for topic in topology.source_topics()
    ]


def test_each_output_topic_lists_its_derived_and_own_rules():
    spec = JobSpec(SENSOR_ALERTS)
    text = rules_markdown(spec)
    promises = topic_promises(spec.topology())
    for rule in shape_rules():
        assert rule["type"] in text.splitlines()[0]
    for topic in spec.topic_schemas:
        (line,) = [line for line in text.splitlines() if line.startswith(f"- `{topic}`")]
        for rule in (r for p in promises.get(topic, []) for r in promise_rules(p)):
            assert f"`{rule['type']}(" in line.split("; the job's own:")[0], (topic, rule)
    assert "expect_no_updates_after_window_closes(grace_ms=120000)" in text
    own = [line for line in text.splitlines() if line.startswith("- `low-activity-alerts`")][0]
    assert 'max_value={"$PARAMETER": "low_activity_threshold"}' in own.split("; the job's own:")[1]


def test_the_markdown_fences_the_diagram():
    text = job_markdown(SENSOR_ALERTS)
    diagram = topology_diagram(JobSpec(SENSOR_ALERTS).topology())
    assert f"```text\n{diagram}\n```" in text
    assert "#### Quality rules per output topic" in text
