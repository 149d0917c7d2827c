"""Sources: upstream repositories read as git blobs at a ref (or a work tree), and line links."""
