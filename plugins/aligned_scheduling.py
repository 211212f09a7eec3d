"""Registers the aligned timetable with Airflow.

Airflow serializes a DAG's timetable by its import path and refuses a custom one that no plugin
registered; the DAGs import `AlignedIntervalTimetable` from `pipeline_airflow.timetables`, so this is
the path registered here.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from pipeline_airflow.timetables import AlignedIntervalTimetable


class AlignedSchedulingPlugin(AirflowPlugin):
    name = "aligned_scheduling"
    timetables = [AlignedIntervalTimetable]
