"""Instrumentation: what the agent did, recorded live (stream parsers into normalized actions, and
the log/metrics tails, revisions and resource sampling)."""
