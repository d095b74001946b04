"""Which implementer CLIs are installed, and what they say about themselves.

For each implementer: where it is (PATH, executable files only; a pinned
COMMANDCODE_BIN; the desktop bundle of a CLI that ships inside an app), its
version, whether it is logged in (where the CLI can tell), which models it
offers, and with `usage` how many sessions it has stored and when it was last
used (directory listings and mtimes only: session files hold conversations
and are never opened). Every probe is bounded at 10 s, as in the Node bundle;
probes of different CLIs, and the independent probes of one CLI, run side by
side, a few at a time (probe_slots), and a probe that hit the cap while
others ran is tried once more on its own.

The report is `delegate-discover.v1`, key for key as the Node bundle prints it.

- locate.py: where a CLI is installed (PATH, COMMANDCODE_BIN, app bundles).
- probing.py: running a CLI once, bounded, a few at a time (Probe, Slots, run_probe).
- answers.py: what the probes mean: version, sign-in, models.
- usage.py: stored sessions and last use, from listings and mtimes.
- report.py: the report itself (discover, discover_cached).
- cache.py: what discover found, remembered until it could have changed.

This package's `__init__` imports nothing: the relay reads the cache (cache.py)
on every dispatch without loading the probing machinery.
"""
