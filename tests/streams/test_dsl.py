"""Stateless DSL operators, KTable operations and grouped-table aggregation."""

from __future__ import annotations

from spark_jobs.streams import StreamsBuilder, TopologyTestDriver

from .helpers import pipe_all, read


def run(build, records, topic="input", outputs=("output",)):
    builder = StreamsBuilder()
    build(builder)
    driver = TopologyTestDriver(builder.build())
    pipe_all(driver, topic, records)
    return [read(driver, name) for name in outputs]


def test_stateless_operators_pass_the_input_timestamp() -> None:
    def build(b):
        (
            b.stream("input")
            .filter(lambda k, v: v > 0)
            .filter_not(lambda k, v: v == 3)
            .map(lambda k, v: (k.upper(), v * 10))
            .select_key(lambda k, v: f"{k}{v}")
            .flat_map_values(lambda v: [v, v + 1])
            .flat_map(lambda k, v: [(k, v), (k + "!", -v)])
            .map_values(lambda v: v * 2)
            .to("output")
        )

    (out,) = run(build, [("a", 1, 5), ("b", -1, 6), ("c", 3, 7), ("d", 2, 8)])
    assert out == [
        ["A10", 20, 5],
        ["A10!", -20, 5],
        ["A10", 22, 5],
        ["A10!", -22, 5],
        ["D20", 40, 8],
        ["D20!", -40, 8],
        ["D20", 42, 8],
        ["D20!", -42, 8],
    ]


def test_branch_merge_peek_and_foreach() -> None:
    seen: list = []

    def build(b):
        small, large = b.stream("input").branch(lambda k, v: v < 10, lambda k, v: v < 100)
        small.map_values(lambda v: ("small", v)).merge(large.map_values(lambda v: ("large", v))).peek(
            lambda k, v: seen.append(v)
        ).to("output")
        b.stream("other").foreach(lambda k, v: seen.append(("other", v)))

    (out,) = run(build, [("a", 5, 1), ("b", 50, 2), ("c", 500, 3)])
    assert out == [["a", ("small", 5), 1], ["b", ("large", 50), 2]]
    assert seen == [("small", 5), ("large", 50)]


def test_non_windowed_reduce_and_aggregate() -> None:
    def build(b):
        grouped = b.stream("input").group_by(lambda k, v: k[0])
        grouped.reduce(lambda agg, v: agg + v).to_stream().to("reduced")
        grouped.aggregate(lambda: [], lambda k, v, agg: agg + [v]).to_stream().to("aggregated")

    reduced, aggregated = run(
        build, [("a1", 1, 10), ("a2", 2, 5), ("b1", 3, 7)], outputs=("reduced", "aggregated")
    )
    assert reduced == [["a", 1, 10], ["a", 3, 10], ["b", 3, 7]]
    assert aggregated == [["a", [1], 10], ["a", [1, 2], 10], ["b", [3], 7]]


def test_table_group_by_subtracts_then_adds() -> None:
    def build(b):
        (
            b.table("input")
            .group_by(lambda k, v: (v["region"], v["amount"]))
            .reduce(lambda agg, v: agg + v, lambda agg, v: agg - v)
            .to_stream()
            .to("output")
        )

    (out,) = run(
        build,
        [
            ("u1", {"region": "eu", "amount": 5}, 1),
            ("u2", {"region": "eu", "amount": 7}, 2),
            ("u1", {"region": "us", "amount": 5}, 3),  # moves: subtract from eu, add to us
            ("u2", {"region": "eu", "amount": 1}, 4),  # same group: one combined update
            ("u2", None, 5),
        ],
    )  # delete: subtract only
    assert out == [["eu", 5, 1], ["eu", 12, 2], ["eu", 7, 3], ["us", 5, 3], ["eu", 1, 4], ["eu", 0, 5]]


def test_table_filter_forwards_tombstones_for_filtered_rows() -> None:
    def build(b):
        b.table("input").filter(lambda k, v: v % 2 == 0).to_stream().to("output")

    (out,) = run(build, [("A", 1, 1), ("B", 2, 2), ("A", None, 3), ("B", None, 4)])
    # Kafka without old values: a row failing the predicate is sent as a tombstone
    assert out == [["A", None, 1], ["B", 2, 2], ["A", None, 3], ["B", None, 4]]


def test_table_map_values_and_source_tombstones() -> None:
    def build(b):
        b.table("input").map_values(lambda v: v * 3).to_stream().to("output")

    (out,) = run(build, [("a", 1, 1), ("a", None, 2)])
    assert out == [["a", 3, 1], ["a", None, 2]]
