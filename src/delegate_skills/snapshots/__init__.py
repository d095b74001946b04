"""What a run changed: work-tree snapshots, the change record, the read-only tripwire."""
