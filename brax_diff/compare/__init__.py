"""Comparison: pairing both sides key by key, the rule table, severities, published results."""
