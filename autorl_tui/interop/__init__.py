"""Other harnesses' files: reading them into the store and writing ours in their shape."""
