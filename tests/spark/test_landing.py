"""Parsing, validation and partitioning of landing files (pure Python, no Spark)."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from operator import attrgetter

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.spark import landing
from spark_jobs.spark.landing import Reason, crc32_of_strings, partition_for_key, read_landing_file

BAD_LINES = {
    b'{"key": "a", "timestamp": ': Reason.UNPARSEABLE,
    b'["a", 1]': Reason.NOT_AN_OBJECT,
    b'{"value": 1, "timestamp": 5}': Reason.MISSING_KEY,
    b'{"key": null, "timestamp": 5}': Reason.MISSING_KEY,
    b'{"key": 7, "timestamp": 5}': Reason.ILL_TYPED_KEY,
    b'{"key": "a"}': Reason.MISSING_TIMESTAMP,
    b'{"key": "a", "timestamp": "5"}': Reason.ILL_TYPED_TIMESTAMP,
    b'{"key": "a", "timestamp": 5.5}': Reason.ILL_TYPED_TIMESTAMP,
    b'{"key": "a", "timestamp": true}': Reason.ILL_TYPED_TIMESTAMP,
    b'{"key": "a", "timestamp": 9223372036854775808}': Reason.ILL_TYPED_TIMESTAMP,
    b'{"key": "a", "timestamp": -1}': Reason.NEGATIVE_TIMESTAMP,
    b'{"key": "a", "timestamp": 5, "partition": "0"}': Reason.ILL_TYPED_PARTITION,
    b'{"key": "a", "timestamp": 5, "partition": 4}': Reason.PARTITION_OUT_OF_RANGE,
    b'{"key": "a", "timestamp": 5, "offset": -3}': Reason.ILL_TYPED_OFFSET,
    b'{"key": "\xff", "timestamp": 5}': Reason.INVALID_UTF8,
}


def test_partition_is_crc32_of_utf8_key_modulo_count():
    assert partition_for_key("sensor-0001", 4) == zlib.crc32(b"sensor-0001") % 4
    assert partition_for_key("żółw", 7) == zlib.crc32("żółw".encode()) % 7


def test_every_kind_of_bad_line_is_quarantined_with_reason_raw_text_and_line():
    good = [
        b'{"key": "a", "value": {"t": 1.5}, "timestamp": 10}',
        b'{"key": "b", "value": null, "timestamp": 0}',
    ]
    lines = [good[0], *BAD_LINES, b"   ", good[1]]
    parsed = read_landing_file("/in/f.jsonl", b"\n".join(lines) + b"\n", 4)
    assert parsed.records_read == len(BAD_LINES) + 2
    q = parsed.quarantined
    assert q.reasons == list(BAD_LINES.values())
    assert q.lines == list(range(2, 2 + len(BAD_LINES)))
    assert q.raws[0] == '{"key": "a", "timestamp": '
    assert q.raws[-1] == '{"key": "\\xff", "timestamp": 5}'  # undecodable bytes kept visible
    records = {k: r for r in parsed.by_partition.values() for k in r.keys}
    assert set(records) == {"a", "b"}
    a = records["a"]
    assert a.values[a.keys.index("a")] == {"t": 1.5}
    assert parsed.by_partition[partition_for_key("b", 4)].lines[-1] == len(lines)


def test_explicit_partition_and_offset_are_kept():
    text = b'{"key": "a", "value": 1, "timestamp": 3, "partition": 2, "offset": 17}\n'
    parsed = read_landing_file("f.jsonl", text, 4)
    assert list(parsed.by_partition) == [2]
    assert parsed.by_partition[2].offsets == [17]


def test_records_keep_file_order_within_a_partition():
    lines = [json.dumps({"key": "k", "value": i, "timestamp": 100 - i}) for i in range(5)]
    parsed = read_landing_file("f.jsonl", "\n".join(lines).encode(), 3)
    (records,) = parsed.by_partition.values()
    assert records.decoded_values() == [0, 1, 2, 3, 4]
    assert records.values_json is not None  # a clean file: values decoded later, in one call per chunk
    assert records.timestamps == [100, 99, 98, 97, 96]


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def test_parquet_rows_are_validated_like_json_lines():
    table = pa.table(
        {
            "key": pa.array(["a", None, "c", "d"]),
            "value": [{"t": 1.0}, {"t": 2.0}, {"t": 3.0}, None],
            "timestamp": pa.array([5, 6, -1, None], pa.int64()),
        }
    )
    parsed = read_landing_file("f.parquet", _parquet(table), 2)
    assert parsed.quarantined.reasons == [
        Reason.MISSING_KEY,
        Reason.NEGATIVE_TIMESTAMP,
        Reason.MISSING_TIMESTAMP,
    ]
    assert json.loads(parsed.quarantined.raws[0]) == {"key": None, "value": {"t": 2.0}, "timestamp": 6}
    (records,) = parsed.by_partition.values()
    assert records.keys == ["a"] and records.values == [{"t": 1.0}]


def test_parquet_with_wrong_column_types_quarantines_every_row():
    table = pa.table({"key": pa.array([1, 2], pa.int64()), "timestamp": pa.array([1, 2], pa.int64())})
    parsed = read_landing_file("f.parquet", _parquet(table), 2)
    assert parsed.quarantined.reasons == [Reason.ILL_TYPED_KEY] * 2


@pytest.mark.parametrize("name", ["f.parquet", "f.jsonl.gz"])
def test_unreadable_file_is_one_quarantined_record(name):
    parsed = read_landing_file(name, b"PAR1 not really", 2)
    assert parsed.records_read == 1
    assert parsed.quarantined.reasons == [Reason.UNREADABLE_FILE]


def test_gzipped_json_lines_are_read():
    parsed = read_landing_file("f.jsonl.gz", gzip.compress(b'{"key": "a", "timestamp": 1}\n'), 2)
    assert parsed.records_read == 1 and not parsed.quarantined


@pytest.mark.parametrize(
    "line", [b'{"key": "a", "value": NaN, "timestamp": 1}', b'{"key": "a", "value": 1e400, "timestamp": 1}']
)
def test_json_is_strict(line):
    parsed = read_landing_file("f.jsonl", line, 2)
    assert parsed.quarantined.reasons == [Reason.UNPARSEABLE]


def test_clean_files_take_the_bulk_path_with_the_same_result():
    lines = [
        json.dumps({"key": f"k{i % 7}", "value": [i, {"x": i / 3}], "timestamp": 1000 + i}) for i in range(50)
    ]
    clean = read_landing_file("f.jsonl", ("\n".join(lines) + "\n").encode(), 3)
    # One blank line sends the file down the line-by-line path; records and lines must not change.
    mixed = read_landing_file("f.jsonl", ("\n".join(lines[:20]) + "\n\n" + "\n".join(lines[20:])).encode(), 3)
    assert set(clean.by_partition) == set(mixed.by_partition) == {0, 1, 2}
    for p, recs in clean.by_partition.items():
        other = mixed.by_partition[p]
        assert (recs.keys, recs.decoded_values(), recs.timestamps) == (
            other.keys,
            other.values,
            other.timestamps,
        )
        assert other.lines == [n if n <= 20 else n + 1 for n in recs.lines]


def test_clean_parquet_takes_the_column_path_with_the_same_result():
    keys = [f"k{i % 5}" for i in range(40)]
    values = [{"t": float(i)} for i in range(40)]
    clean = read_landing_file(
        "f.parquet", _parquet(pa.table({"key": keys, "value": values, "timestamp": list(range(40))})), 3
    )
    # A null timestamp in the last row sends the file down the row-by-row path.
    mixed_table = pa.table(
        {"key": keys + ["x"], "value": values + [None], "timestamp": pa.array([*range(40), None], pa.int64())}
    )
    mixed = read_landing_file("f.parquet", _parquet(mixed_table), 3)
    assert mixed.quarantined.reasons == [Reason.MISSING_TIMESTAMP] and not clean.quarantined
    for p, recs in clean.by_partition.items():
        other = mixed.by_partition[p]
        assert (recs.keys, recs.values, recs.timestamps, recs.lines) == (
            other.keys,
            other.values,
            other.timestamps,
            other.lines,
        )


def test_parquet_keys_of_several_row_groups_and_large_strings_number_like_json_keys():
    # The column path hands the key column to Arrow as it is read: chunks (one per row group) and
    # large_string keys must give the same partitions, tables and codes as the same records in JSON.
    keys = [f"k{i % 9}é" for i in range(40)]
    table = pa.table({"key": pa.array(keys, pa.large_string()), "timestamp": list(range(40))})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=7)
    from_parquet = read_landing_file("f.parquet", sink.getvalue(), 3)
    lines = "".join(json.dumps({"key": k, "timestamp": i}) + "\n" for i, k in enumerate(keys))
    from_json = read_landing_file("f.jsonl", lines.encode(), 3)
    numbered = attrgetter("key_table", "keys", "timestamps", "lines")
    assert set(from_parquet.by_partition) == set(from_json.by_partition)
    for partition, records in from_parquet.by_partition.items():
        other = from_json.by_partition[partition]
        assert numbered(records) == numbered(other)
        assert records.key_codes.tolist() == other.key_codes.tolist()


def test_lone_surrogate_is_unparseable():
    parsed = read_landing_file("f.jsonl", b'{"key": "a", "value": "\\ud800", "timestamp": 1}\n', 2)
    assert parsed.quarantined.reasons == [Reason.UNPARSEABLE]


GOOD = [
    b'{"key": "a", "value": {"t": 1.5}, "timestamp": 10}',
    b'{"key": "b", "value": [1, 2], "timestamp": 11}',
]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b'"\xff"', Reason.INVALID_UTF8),  # only the key is decoded in bulk: values are checked apart
        (b'"\xed\xa0\x80"', Reason.INVALID_UTF8),  # a surrogate encoded in UTF-8
        (b"[" * 5000 + b"]" * 5000, Reason.UNPARSEABLE),  # deeper than the decoder goes
        (b"-1E400", Reason.UNPARSEABLE),
        (b"1" + b"0" * 400 + b".5", Reason.UNPARSEABLE),  # beyond float range without an exponent
    ],
)
@pytest.mark.parametrize("keep_values", [True, False])
def test_a_bad_value_in_an_otherwise_clean_file_costs_one_line(value, reason, keep_values):
    # A topology that never reads values still gets only records whose values are valid JSON.
    bad = b'{"key": "c", "value": ' + value + b', "timestamp": 12}'
    parsed = read_landing_file("f.jsonl", b"\n".join([GOOD[0], bad, GOOD[1]]) + b"\n", 2, keep_values)
    assert parsed.quarantined.reasons == [reason]
    assert parsed.quarantined.lines == [2]
    assert sorted(k for r in parsed.by_partition.values() for k in r.keys) == ["a", "b"]


def test_values_that_are_surely_decodable_stay_json_text_and_decode_later():
    lines = [
        b'{"key": "a", "value": {"t": 1.5e3, "u": "\\u00e9t\\u00e9", "w": "caf\xc3\xa9"}, "timestamp": 10}',
        b'{"key": "a", "value": 123456789012345678901234567890, "timestamp": 11}',
    ]
    (records,) = read_landing_file("f.jsonl", b"\n".join(lines), 1).by_partition.values()
    assert records.values_json is not None
    assert records.decoded_values() == [
        {"t": 1500.0, "u": "été", "w": "café"},
        123456789012345678901234567890,
    ]


def test_without_values_kept_a_clean_file_gives_each_record_none():
    lines = [json.dumps({"key": f"k{i % 3}", "value": {"t": i}, "timestamp": i}) for i in range(9)]
    kept = read_landing_file("f.jsonl", "\n".join(lines).encode(), 2)
    bare = read_landing_file("f.jsonl", "\n".join(lines).encode(), 2, keep_values=False)
    assert set(bare.by_partition) == set(kept.by_partition)
    for partition, records in bare.by_partition.items():
        assert records.values is None and records.values_json is None
        assert records.decoded_values() == [None] * len(records)
        other = kept.by_partition[partition]
        assert (records.keys, records.timestamps, records.lines) == (
            other.keys,
            other.timestamps,
            other.lines,
        )


@pytest.mark.parametrize(
    "odd_line",
    [
        b'{"key": "x", "timestamp": 5}, {"key": "y", "timestamp": 6}',  # two records on one line
        b'{"key": "x", "timestamp": 5}]',
        b'[{"key": "x", "timestamp": 5}',
        b"",  # a blank line is not a record
        b"   ",
    ],
)
@pytest.mark.parametrize("piece_bytes", [1, 40, landing.CLEAN_PIECE_BYTES])
def test_the_bulk_path_keeps_one_record_per_line(odd_line, piece_bytes, monkeypatch):
    """Clean files are decoded as JSON arrays of their lines (a piece of the file each): a line that is not
    exactly one record must not shift or add records, whatever it does to the array."""
    monkeypatch.setattr(landing, "CLEAN_PIECE_BYTES", piece_bytes)
    lines = [json.dumps({"key": f"k{i}", "timestamp": i}).encode() for i in range(6)]
    lines[2] = odd_line
    parsed = read_landing_file("f.jsonl", b"\n".join(lines) + b"\n", 1)
    (records,) = parsed.by_partition.values()
    assert records.keys == ["k0", "k1", "k3", "k4", "k5"]
    assert records.lines == [1, 2, 4, 5, 6]
    assert parsed.quarantined.lines == ([] if not odd_line.strip() else [3])


def test_without_content_the_file_is_read_from_its_path(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"\n".join(GOOD))
    parsed = read_landing_file(str(path), None, 2)
    assert sorted(k for r in parsed.by_partition.values() for k in r.keys) == ["a", "b"]
    missing = read_landing_file(str(tmp_path / "gone.jsonl"), None, 2)
    assert missing.quarantined.reasons == [Reason.UNREADABLE_FILE]
    assert "FileNotFoundError" in missing.quarantined.raws[0]


# Value texts as a producer might write them: numbers of every shape and size, escapes and raw UTF-8,
# nesting, and a few that are not JSON at all.
_NUMBERS = st.one_of(
    st.integers(min_value=-(10**400), max_value=10**400).map(lambda i: str(i).encode()),
    st.tuples(
        st.integers(min_value=-(10**20), max_value=10**20),
        st.integers(min_value=0, max_value=999),
        st.sampled_from([b"e", b"E", b"e+", b"e-", b"E-"]),
        st.integers(min_value=0, max_value=450),
    ).map(lambda t: b"%d.%d%s%d" % (t[0], t[1], t[2], t[3])),
    st.integers(min_value=280, max_value=330).map(lambda n: b"9" * n + b".5"),
)
_STRINGS = st.one_of(
    st.text(max_size=8).map(lambda s: json.dumps(s, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.text(max_size=8).map(lambda s: json.dumps(s).encode()),
    # raw bytes in a string (a newline would end the line: not part of a value)
    st.binary(max_size=4).map(lambda b: b'"' + bytes(c for c in b if c not in b'\\"\n') + b'"'),
)
_VALUES = st.recursive(
    st.one_of(_NUMBERS, _STRINGS, st.sampled_from([b"null", b"true", b"NaN", b"1e", b"01"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: b"[" + b", ".join(xs) + b"]"),
        st.lists(inner, max_size=3).map(
            lambda xs: b"{" + b", ".join(b'"f%d": %s' % (i, x) for i, x in enumerate(xs)) + b"}"
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_VALUES, min_size=1, max_size=6))
def test_every_line_is_accepted_exactly_when_it_decodes_strictly(values):
    """The oracle is a strict decode of each whole line: the bulk path (scan, or decode when unsure)
    must accept the same lines, with the same values, and quarantine the others, never raise."""
    lines = [b'{"key": "k%d", "value": %s, "timestamp": %d}' % (i, v, i) for i, v in enumerate(values)]
    expected_good, expected_bad = {}, []
    for number, line in enumerate(lines, start=1):
        try:
            expected_good[f"k{number - 1}"] = msgspec.json.decode(line)["value"]
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError):
            expected_bad.append(number)
    parsed = read_landing_file("f.jsonl", b"\n".join(lines) + b"\n", 3)
    assert parsed.quarantined.lines == expected_bad
    got = {}
    for records in parsed.by_partition.values():
        got.update(zip(records.keys, records.decoded_values(), strict=True))
    assert got == expected_good
    # without values kept: the same lines accepted and quarantined
    bare = read_landing_file("f.jsonl", b"\n".join(lines) + b"\n", 3, keep_values=False)
    assert bare.quarantined.lines == expected_bad
    assert sorted(k for r in bare.by_partition.values() for k in r.keys) == sorted(expected_good)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([f"k{i}" for i in range(12)] + ["é", ""]), min_size=1, max_size=60),
    st.integers(1, 5),
)
def test_each_partition_gets_its_records_in_file_order_and_a_table_of_its_own_keys(keys, num_partitions):
    lines = b"".join(json.dumps({"key": k, "timestamp": i}).encode() + b"\n" for i, k in enumerate(keys))
    parsed = read_landing_file("f.jsonl", lines, num_partitions)
    assert not parsed.quarantined.lines
    for partition in range(num_partitions):
        own = [(i, k) for i, k in enumerate(keys) if partition_for_key(k, num_partitions) == partition]
        records = parsed.by_partition.get(partition)
        if not own:
            assert records is None
            continue
        assert records.timestamps == [i for i, _ in own]
        assert records.keys == [k for _, k in own]
        assert records.key_table == list(dict.fromkeys(k for _, k in own))  # distinct, by first appearance


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=50), st.integers(0, 3))
def test_crc32_of_strings_is_zlib_crc32_of_each_utf8_string(strings, cut):
    """The partitioner's array form: the same partition as `partition_for_key`, key by key, also for
    empty and non-ASCII keys and for an array that is a slice of another (Arrow offsets then start
    later)."""
    strings = [s.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for s in strings]
    array = pa.array(["x" * 7] * cut + strings, pa.string()).slice(cut)
    expected = [zlib.crc32(s.encode("utf-8")) for s in strings]
    assert crc32_of_strings(array).tolist() == expected
    assert [c % 5 for c in expected] == [partition_for_key(s, 5) for s in strings]


@pytest.mark.parametrize(
    ("timestamp", "reason"),
    [
        (2**63, Reason.ILL_TYPED_TIMESTAMP),
        (-(2**63) - 1, Reason.NEGATIVE_TIMESTAMP),
        (-1, Reason.NEGATIVE_TIMESTAMP),
    ],
)
def test_a_timestamp_out_of_int64_or_negative_in_an_otherwise_clean_file_costs_its_line_only(
    timestamp, reason
):
    # The bulk path reads timestamps into an int64 array: a value it cannot hold must not pass or crash.
    lines = [json.dumps({"key": f"k{i}", "timestamp": 1000 + i}) for i in range(10)]
    lines[4] = json.dumps({"key": "k4", "timestamp": timestamp})
    parsed = read_landing_file("f.jsonl", ("\n".join(lines) + "\n").encode(), 2)
    assert parsed.quarantined.reasons == [reason] and parsed.quarantined.lines == [5]
    assert sorted(k for r in parsed.by_partition.values() for k in r.keys) == sorted(
        f"k{i}" for i in range(10) if i != 4
    )


_LINES = st.one_of(
    st.builds(
        lambda k, t, v: json.dumps({"key": f"k{k}", "value": v, "timestamp": t}).encode(),
        st.integers(0, 9),
        st.integers(0, 99),
        st.one_of(st.none(), st.integers(), st.text(max_size=3)),
    ),
    st.sampled_from([b"", b" ", b'{"key": "x", "timestamp": -1}', b'{"key": 1, "timestamp": 1}']),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_LINES, min_size=1, max_size=30), st.sampled_from([b"", b"\n", b"\n\n"]), st.integers(1, 300))
def test_a_file_decoded_in_pieces_gives_what_it_gives_whole(lines, end, piece_bytes):
    """The bulk path decodes a file a piece at a time: any piece size gives the same records, lines and
    quarantine as one piece holding the whole file (blank lines anywhere, at piece ends too)."""
    content = b"\n".join(lines) + end

    def parse() -> tuple:
        parsed = read_landing_file("f.jsonl", content, 3)
        by_partition = {
            p: (r.keys, r.decoded_values(), list(r.timestamps), list(r.lines))
            for p, r in parsed.by_partition.items()
        }
        return by_partition, parsed.quarantined.lines, parsed.quarantined.reasons

    whole = parse()
    original = landing.CLEAN_PIECE_BYTES
    try:
        landing.CLEAN_PIECE_BYTES = piece_bytes
        assert parse() == whole
    finally:
        landing.CLEAN_PIECE_BYTES = original
