"""`history`: the commits in a range that change a canonical fact."""
