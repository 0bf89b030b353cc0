"""autorl-tui: operator console and headless harness for agentic RL post-training benchmarks."""

__version__ = "0.1.0"
