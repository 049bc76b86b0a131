"""Clover on existing serving engines (out-of-tree model plugins). Nothing here is imported by the
rest of Clover, and the engines themselves are imported only when an engine loads the plugin."""
