"""Kafka Streams' event-time guarantees on Spark Structured Streaming.

`streams` is the pure-Python engine, `spark` runs its topologies on Spark, `jobs` holds runnable jobs.
"""
