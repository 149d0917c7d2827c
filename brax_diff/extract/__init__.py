"""Running the extractors: answered from the fact cache, filled in parallel."""
