"""Entries' parts hold their keys as pickled bytes, unpickled once per load for equal bytes
(runtime/part_keys.py): the same keys come back, of the same types, and two stores that saved the same
keys share them again after a load."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.streams import StreamTask
from spark_jobs.streams.nodes.aggregations import TimeWindowAggregateNode
from spark_jobs.streams.nodes.suppress import SuppressNode
from spark_jobs.streams.runtime.part_keys import KeyListLoader, dumps_entries_part

from .helpers import stores_of_few_rows_in_many_groups  # noqa: F401 - a fixture, autouse
from .test_final_window_count import TOPIC, finals_topology

KEYS = st.one_of(
    st.text(max_size=4),
    st.integers(-3, 3),
    st.booleans(),
    st.floats(allow_nan=False, width=16),
    st.tuples(st.text(max_size=2), st.integers(0, 2)),
)


@given(st.lists(st.lists(KEYS, max_size=6), max_size=4), st.data())
def test_parts_load_with_their_keys_and_types(key_lists, data) -> None:
    # some lists repeat an earlier one: the same objects, or equal ones of other types (1 and True)
    parts = []
    for keys in key_lists:
        if parts and data.draw(st.booleans()):
            keys = list(data.draw(st.sampled_from(parts))[0]["keys"])
        parts.append(({"keys": keys, "rows": b"", "columns": []}, ["gone"]))
    loader = KeyListLoader()
    loaded = [loader.loads(dumps_entries_part(part)) for part in parts]
    assert loaded == parts
    for (saved, _), (back, _) in zip(parts, loaded, strict=True):
        assert list(map(type, back["keys"])) == list(map(type, saved["keys"]))


def test_equal_keys_of_other_types_are_loaded_apart() -> None:
    loader = KeyListLoader()
    first, last = "a", "z"
    ints, bools = [first, 1, 0, last], [first, True, False, last]  # the same first and last objects
    assert ints == bools
    back = [loader.loads(dumps_entries_part(({"keys": keys}, []))) for keys in (ints, bools)]
    assert [type(key) for key in back[1][0]["keys"]] == [str, bool, bool, str]


def test_a_part_of_the_earlier_form_loads_as_it_is() -> None:
    part = ({"keys": ["a", "b"], "columns": [[1, 2]]}, [])
    assert KeyListLoader().loads(pickle.dumps(part)) == part


def test_the_count_and_its_final_buffer_share_their_keys_after_an_import() -> None:
    topology = finals_topology(1000, 1000, 0)
    task = StreamTask(topology)
    keys = [f"sensor-{i}" for i in range(300)]
    task.process_batch(TOPIC, keys, [0] * 300, list(range(300)))
    export = task.export_state()
    saved = {name.split("/")[1]: pickle.loads(data)[0] for name, data in export.parts.items() if "/" in name}
    (buffer_part,) = (part for part in saved.values() if "shared_keys" in part)
    # the buffer's rows are the count's, key for key: it saves how many, not the keys
    assert buffer_part["keys"] == () and buffer_part["shared_keys"] == 300
    # the count's window saves its keys apart (nodes/time_window_store.py), as the chunks pickled once
    assert [key for chunk in saved["0k.0"]["keys"] for key in pickle.loads(chunk)] == keys
    # and its rows' fields, every row new, in one delta (nodes/kv_rows.py), without keys
    assert [name for name in saved if name.startswith("0w")] == ["0w.1"]
    assert saved["0w.1"]["keys"] == () and saved["0w.1"]["rows"].tolist() == list(range(300))

    restored = StreamTask.import_state(topology, export.parts)
    (count,) = (n for n in restored.nodes.values() if isinstance(n, TimeWindowAggregateNode))
    (suppress,) = (n for n in restored.nodes.values() if isinstance(n, SuppressNode))
    count_keys, buffer_keys = count.store.rows(0).keys, suppress.buffer.window_rows((0, 1000)).keys
    assert count_keys.tolist() == buffer_keys.tolist() == keys
    assert all(a is b for a, b in zip(count_keys, buffer_keys, strict=True))
