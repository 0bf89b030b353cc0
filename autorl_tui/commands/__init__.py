"""CLI commands: one module each, exposing `register(subparsers)`. Modules starting with `_`
are helpers used by the top-level entry point (batch, console)."""
