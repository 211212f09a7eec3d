"""The plugin folder as Airflow loads it: the timetable registered under the path the DAGs import."""

from __future__ import annotations

import sys
from pathlib import Path

from airflow import plugins_manager
from pipeline_airflow.timetables import AlignedIntervalTimetable

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def test_the_timetable_is_registered_under_the_import_path_the_dags_use():
    registered = plugins_manager.get_timetables_plugins()
    assert registered["pipeline_airflow.timetables.AlignedIntervalTimetable"] is AlignedIntervalTimetable


def test_our_plugin_files_load_without_errors():
    plugins_manager.ensure_plugins_loaded()
    ours = {"aligned_scheduling.py"} | {p.name for p in (PLUGINS / "pipeline_airflow").iterdir()}
    errors = {
        path: error
        for path, error in plugins_manager.get_import_errors().items()
        if any(n in path for n in ours)
    }
    assert errors == {}


def test_the_helper_package_is_not_imported_again_as_plugin_files():
    # Without plugins/.airflowignore Airflow would load each of its files as a top-level module
    # (`timetables`, `sensors`, ...): a second copy of every class, under another import path.
    plugins_manager.ensure_plugins_loaded()
    stems = {p.stem for p in (PLUGINS / "pipeline_airflow").glob("*.py")} - {"__init__"}
    assert stems and not stems & set(sys.modules)
