"""Implementations behind task cards that need more than a data file (games, environments)."""
