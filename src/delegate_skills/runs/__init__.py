"""A run's life after dispatch: list, show, wait, cancel, logs, diff, undo, land, prune, review."""
