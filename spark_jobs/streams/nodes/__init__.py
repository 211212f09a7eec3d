"""The processor-node layer: the per-task instances a StreamTask wires together (base classes in base.py,
the DSL's operators, aggregations, joins and stores, suppress's time-ordered buffer)."""
