"""The runtime layer: StreamTask (runs one partition of a topology), its punctuation, the narrow
TaskContext its nodes see, and the columnar batch merge."""
