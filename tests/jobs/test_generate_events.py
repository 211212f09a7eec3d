"""The event generator: deterministic content, atomic files in admission order, every kind of bad record."""

from __future__ import annotations

import json

from spark_jobs.jobs import generate_events
from spark_jobs.spark.in_memory import landing_files
from spark_jobs.spark.landing import Reason, read_landing_file


def _read_all(directory, partitions=4):
    return [read_landing_file(p, open(p, "rb").read(), partitions) for p, _ in landing_files(directory)]


def test_files_are_in_name_order_with_increasing_mtimes_and_no_temporaries(tmp_path):
    generate_events.main(["--output", str(tmp_path), "--events", "3000", "--files", "6"])
    generate_events.main(["--output", str(tmp_path), "--events", "500", "--files", "2", "--seed", "7"])
    files = landing_files(tmp_path)
    names = [p.rsplit("/", 1)[1] for p, _ in files]
    assert names == [f"events-{i:06d}.jsonl" for i in range(1, 9)]
    mtimes = [m for _, m in files]
    assert mtimes == sorted(set(mtimes))  # strictly increasing, in milliseconds
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_same_seed_same_content(tmp_path):
    for d in ("a", "b"):
        generate_events.main(
            ["--output", str(tmp_path / d), "--events", "2000", "--files", "3", "--bad-fraction", "0.05"]
        )
    for name in ("events-000001.jsonl", "events-000003.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_realistic_mix_late_silent_and_every_bad_kind(tmp_path):
    generate_events.main(
        [
            "--output",
            str(tmp_path),
            "--events",
            "20000",
            "--sensors",
            "40",
            "--files",
            "4",
            "--late-fraction",
            "0.02",
            "--bad-fraction",
            "0.01",
        ]
    )
    facts = json.loads((tmp_path / "_generated.json").read_text())
    parsed = _read_all(tmp_path)
    reasons = {r for f in parsed for r in f.quarantined.reasons}
    assert reasons == set(Reason.ALL) - {Reason.UNREADABLE_FILE}  # every kind a JSON line can have
    assert sum(len(f.quarantined) for f in parsed) == facts["bad_records"] == 200
    assert sum(f.records_read for f in parsed) == 20200
    assert facts["silent_sensors"] and facts["late_injected"] > 0
    # Out of order, but only a little except for the injected late records.
    ts = [t for f in parsed for r in f.by_partition.values() for t in r.timestamps]
    assert any(b < a for a, b in zip(ts, ts[1:], strict=False))
    # Silent sensors stop early; the others keep going to the end.
    last = facts["last_event_by_sensor"]
    span = facts["last_event_ms"] - facts["first_event_ms"]
    assert all(last[s] < facts["first_event_ms"] + 0.85 * span for s in facts["silent_sensors"])


def test_parquet_output_includes_bad_files(tmp_path):
    generate_events.main(
        [
            "--output",
            str(tmp_path),
            "--events",
            "1000",
            "--files",
            "2",
            "--format",
            "parquet",
            "--bad-fraction",
            "0.01",
        ]
    )
    parsed = _read_all(tmp_path)
    reasons = {r for f in parsed for r in f.quarantined.reasons}
    assert {
        Reason.MISSING_KEY,
        Reason.MISSING_TIMESTAMP,
        Reason.NEGATIVE_TIMESTAMP,
        Reason.ILL_TYPED_KEY,
        Reason.UNREADABLE_FILE,
    } <= reasons
    assert sum(len(r) for f in parsed for r in f.by_partition.values()) == 1000


def test_prints_a_short_summary_whatever_the_number_of_sensors(tmp_path, capsys):
    generate_events.main(
        ["--output", str(tmp_path), "--events", "20000", "--sensors", "5000", "--files", "2"]
    )
    printed = json.loads(capsys.readouterr().out)
    facts = json.loads((tmp_path / "_generated.json").read_text())
    assert len(facts["silent_sensors"]) > generate_events.SILENT_EXAMPLES  # the manifest keeps every one
    assert printed["silent_sensors"] == len(facts["silent_sensors"])
    assert printed["silent_sensor_examples"] == facts["silent_sensors"][: generate_events.SILENT_EXAMPLES]
    assert printed["files_written"] == 2 and printed["events"] == 20000
    assert printed["manifest"] == str(tmp_path / "_generated.json")
    assert len(json.dumps(printed)) < 1000


def test_minutes_spreads_the_events_over_that_much_event_time():
    start = generate_events.parse_start(generate_events.DEFAULT_START)
    by_rates = generate_events.generate(30_000, 10_000, 0.0, 42, start)
    spread = generate_events.generate(30_000, 10_000, 0.0, 42, start, minutes=120)
    assert (by_rates["end_ms"] - start) / 60_000 < 15  # three readings per sensor span a few minutes
    assert 115 < (spread["end_ms"] - start) / 60_000 <= 120
    assert len(spread["keys"]) == 30_000


def test_minutes_must_be_positive(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as exit_info:
        generate_events.main(["--output", str(tmp_path), "--minutes", "0"])
    assert exit_info.value.code == 2
    assert "--minutes > 0" in capsys.readouterr().err
