"""`python -m delegate_skills.relay KEY [relay flags]`: one relay run, without the click CLI.

What `delegate fanout` starts for each run: the same relay as `delegate relay
KEY`, with only the standard library loaded, so every parallel run stays small.
"""

import sys

from .main import main

if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
    sys.stderr.write("relay: usage: python -m delegate_skills.relay KEY [relay flags]\n")
    raise SystemExit(2)
raise SystemExit(main(sys.argv[1], sys.argv[2:]))
