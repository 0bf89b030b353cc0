"""HumanEval (Level 1): the bundled problems, partitioned into fixed splits (provider.py)."""
