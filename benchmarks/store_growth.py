#!/usr/bin/env python3
"""What a dispatch's out-dir check costs as the run store fills up.

Every dispatch asks whether its --out-dir holds a run still going or a change not landed
(`runstore.lookup.held_reason`), which needs the newest run recorded for that out-dir. For
stores of 10, 1,000 and 10,000 run records (each a copy of a small record with its own
out-dir, written by this script in a temp dir), times in this process, in alternating
rounds:

- the check as a dispatch makes it, for an out-dir no run used (the out-dir index answers;
  the first lookup, which builds the index, is timed apart);
- reading every record, as the check did before the index (`record.all_records()`).

Prints per size the medians, the ratio of the two, and how many records each check read.
`--sizes 10,1000` picks sizes; `--quick` runs a few rounds.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile

from _common import ROOT, header, measure_here, ms, options, paired, ratio_rows, start

sys.path.insert(0, os.path.join(ROOT, "src"))

from delegate_skills.runstore import lookup, paths, record

SIZES = (10, 1_000, 10_000)


def fill(store: str, count: int, scratch: str) -> None:
    """`count` records of finished runs, each with an out-dir of its own."""
    os.makedirs(store, mode=0o700, exist_ok=True)
    for n in range(count):
        run_id = f"{n:08d}".translate(str.maketrans("0123456789", "abcdefghjk"))
        folder = os.path.join(store, run_id)
        os.mkdir(folder, 0o700)
        data = {
            "schema": record.RECORD_SCHEMA,
            "id": run_id,
            "outDir": os.path.join(scratch, "outs", f"o{n}"),
            "implementer": "codex",
            "startedAt": "2026-01-01T00:00:00Z",
            "ended": {"status": "completed", "exitCode": 0, "at": "2026-01-01T00:01:00Z"},
        }
        with open(os.path.join(folder, "record.json"), "w") as handle:
            json.dump(data, handle)


def counting() -> list[str]:
    """Ids each record.load reads from now on are appended to the list returned."""
    seen: list[str] = []
    real = record.load

    def counted(run_id):
        seen.append(run_id)
        return real(run_id)

    record.load = counted
    return seen


def main() -> int:
    parser, runs = options(__doc__, full=15, quick=3)
    parser.add_argument("--sizes", default=",".join(str(size) for size in SIZES))
    sizes = [int(size) for size in parser.parse_args().sizes.split(",")]
    start()
    reads = counting()
    print(f"rounds: {runs} timed after 1 untimed, in this process")
    print(header("indexed", "read all"))
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="delegate-bench-store-") as scratch:
            os.environ["XDG_STATE_HOME"] = os.path.join(scratch, "state")
            paths._registered.clear()
            fill(record.records_root(), size, scratch)
            fresh = os.path.join(scratch, "fresh-out")
            reads.clear()
            check = functools.partial(lookup.held_reason, fresh)
            first = measure_here(check)
            first_reads = len(reads)
            reads.clear()
            t = paired(
                {
                    "indexed": functools.partial(measure_here, check),
                    "read all": functools.partial(measure_here, record.all_records),
                },
                runs,
            )
            reads.clear()
            check()
            checked = len(reads)
            print(f"{size:,} records:")
            print("\n".join(ratio_rows(f"  {size:>7,}", t["indexed"], t["read all"], None)))
            print(f"  first check (builds the index)   wall {ms(first[0])}, {first_reads} read")
            print(f"  records a later check reads: {checked}; reading all reads {size:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
