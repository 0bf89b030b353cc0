"""Data generators for task cards (`provider: generator`): `generate(split, params, n, seed) -> items`."""
