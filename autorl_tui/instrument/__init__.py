"""Live instrumentation of a run: agent logs and their stream parsers (normalized actions),
training metrics, code revisions, resources."""
