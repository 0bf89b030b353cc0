"""GSM8K (Level 1): the official files from a local path, normalized by normalize.py."""
