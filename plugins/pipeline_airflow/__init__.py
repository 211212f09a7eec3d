"""Airflow building blocks of the pipeline: the aligned timetable, the wall-clock sensor, Spark settings.

A package rather than plugin files: Airflow imports every `.py` file of the plugins folder as a
top-level module named by its stem, so this folder is listed in `plugins/.airflowignore` and imported
normally (the plugins folder is on `sys.path`). `plugins/aligned_scheduling.py` registers the
timetable under its import path here, `pipeline_airflow.timetables.AlignedIntervalTimetable`, which is
the path the DAGs use.
"""
