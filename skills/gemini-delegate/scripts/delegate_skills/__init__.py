"""delegate-skills: hand a brief to a CLI coding agent and get a result you can trust."""

__version__ = "0.1.0"
