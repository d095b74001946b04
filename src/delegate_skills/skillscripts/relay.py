"""`relay.py`, `delegate relay KEY` and `python -m delegate_skills.skillscripts.relay KEY`.

One relay run: load the implementer's adapter, configure the run, and send
it where it goes: here (relay/engine.py) or, with --host, to another machine
(remote/dispatch.py), which runs the same engine there.
"""

from __future__ import annotations

import sys

from ..relay.main import load_adapter


def _remote(relay, brief: str, argv: list[str]) -> int:
    from ..remote.dispatch import dispatch

    return dispatch(relay, brief, argv)


def main(key: str, argv: list[str]) -> int:
    adapter = load_adapter(key)
    if adapter is None:
        sys.stderr.write(f"relay: no relay for implementer {key!r}\n")
        return 2
    from ..relay.engine import Relay

    return Relay(adapter).main(argv, remote=_remote)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.stderr.write(f"relay: usage: python -m {__spec__.name} KEY [relay flags]\n")
        raise SystemExit(2)
    raise SystemExit(main(sys.argv[1], sys.argv[2:]))
