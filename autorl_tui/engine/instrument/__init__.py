"""Live instrumentation of a run: agent logs, training metrics, code revisions, resources."""
