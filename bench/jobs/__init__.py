"""Job modules the Spark benchmark runs on our runtime (each imported by name on the workers), and the
topologies the engine benchmark shares with them."""
