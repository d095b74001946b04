"""Runs on other machines, reached exactly as the user's own `ssh` reaches them.

`--host NAME` (any name the user's ssh accepts: an alias from ~/.ssh/config,
user@host) sends the run to another machine:

- hosts.py: per-host settings (remote work root, python) from hosts.json;
- ssh.py: the system `ssh`, batch mode, a private connection-sharing socket,
  host keys never accepted on the user's behalf; one-line errors;
- shipping.py: the core this relay runs from, packed once per content hash;
- agent.py: what runs on the other machine (standard library only);
- client.py: the local side of a remote run: code over git, the run's files
  mirrored as they come, the change fetched back as a `delegate/…` branch in
  a local worktree, so `runs diff/apply/discard/undo/compare` treat it as any
  worktree run.
"""
