"""The run store: every record a later command acts on, written only by our processes."""
