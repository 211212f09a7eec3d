"""Data-quality gates for the jobs' outputs, with Great Expectations on Spark.

`expectations` holds the custom expectations, `gx_context` opens the GX project in `expectations/` and
loads suites strictly, `validate` is the Spark job that validates an output folder.
"""
