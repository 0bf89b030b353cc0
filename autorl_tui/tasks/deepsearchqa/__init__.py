"""DeepSearchQA (Level 3): multi-hop questions answered by searching and reading a corpus."""
