"""`fix`: the SLM-Lab spec variant that applies the report's fixes, written and re-read."""
