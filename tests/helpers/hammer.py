"""Rewrite one lane file as fast as possible until killed (for crash tests)."""

from __future__ import annotations

import sys

from delegate_skills import fleet

scope, cwd, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
i = 0
while True:
    fleet.edit_lane(
        scope, cwd, f"{prefix}{i % 50}", {"implementer": "kimi", "timeout": f"{i % 90 + 1}m"}
    )
    i += 1
