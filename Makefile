# Two commands for a newcomer: `make demo` and `make test`. Both set up .venv first (idempotent).
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV_BIN := $(CURDIR)/.venv/bin
PY := $(VENV_BIN)/python
export PATH := $(VENV_BIN):$(PATH)
export PYSPARK_PYTHON := $(PY)
export PYSPARK_DRIVER_PYTHON := $(PY)
export SPARK_LOCAL_IP ?= 127.0.0.1
export AIRFLOW__CORE__LOAD_EXAMPLES := False
PYTEST_ARGS ?=

.PHONY: help setup setup-system demo demo-spark test test-fast lint bench airflow clean

help:
	@echo "make demo       set up, generate sensor events, run the pipeline once, print where results are"
	@echo "make demo-spark the job alone on local Spark, without Airflow, into var/demo"
	@echo "make test       set up (incl. Chromium and PostgreSQL from Debian) and run every test"
	@echo "make test-fast  the tests that need neither Spark nor Airflow (under a minute)"
	@echo "make bench      engine and Spark benchmarks against their peers, recorded, docs/performance.md"
	@echo "make airflow    the Airflow UI (airflow standalone) on this repository's DAGs"
	@echo "make lint       ruff"

setup:
	@scripts/setup.sh

setup-system:
	@scripts/setup.sh --system

demo: setup
	@scripts/airflow_demo.sh

demo-spark: setup
	@$(PY) -m spark_jobs.jobs.demo

test: setup-system
	@$(VENV_BIN)/ruff check .
	@$(VENV_BIN)/ruff format --check .
	@scripts/run_tests.sh $(PYTEST_ARGS)

test-fast: setup
	@scripts/run_tests.sh -m "not spark and not airflow and not slow" $(PYTEST_ARGS)

lint: setup
	@$(VENV_BIN)/ruff check .
	@$(VENV_BIN)/ruff format --check .

bench: setup
	@$(PY) bench/engine_bench.py --peer
	@$(PY) bench/spark_bench.py
	@$(PY) bench/enrichment_bench.py
	@$(PY) bench/render.py

airflow: setup
	@scripts/airflow_standalone.sh

clean:
	rm -rf var .pytest_cache .hypothesis spark-warehouse metastore_db
