"""The OS side of a run: process groups, the child subreaper, cgroups, bubblewrap."""
