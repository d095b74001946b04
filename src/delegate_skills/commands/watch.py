"""A live view of runs in flight: `delegate runs watch`, and fanout/batch while they run.

On a terminal, a table (run, implementer and lane, elapsed time, the last
event) is redrawn in place about once a second; when a run ends a line says
so, with a bell. On a pipe nothing is redrawn: one line per run that starts
or ends.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from ..errors import UserError
from ..runs import logs as runlogs
from ..runs import view as runs

BELL = "\a"
_UP_AND_CLEAR = "\x1b[{n}F\x1b[J"


def _elapsed(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def last_event(out_dir: str) -> str:
    """The run's latest event as one readable line ("" when there is none yet)."""
    try:
        path = runlogs.events_path(runs.find(out_dir))
        size = os.path.getsize(path)
    except (UserError, OSError):  # no event log, or not yet: nothing to show
        return ""
    shown, _ = runlogs.lines(path, max(0, size - 16384))
    return shown[-1] if shown else ""


def rows(out_dirs: list[str]) -> list[dict]:
    """The state of each run, as the table shows it."""
    found = []
    for out_dir in out_dirs:
        try:
            run = runs.find(out_dir)
        except UserError:
            continue  # not started yet
        summary = run.summary()
        summary["lastEvent"] = last_event(out_dir) if summary["status"] == "running" else ""
        found.append(summary)
    return found


def _changed(state: dict) -> str:
    totals = state.get("changes")
    if not totals:
        return "-"
    return f"{totals['filesChanged']}f +{totals['linesAdded']} -{totals['linesRemoved']}"


def table(states: list[dict], width: int = 120) -> list[str]:
    """The live table: what each run does now, and once it ended what it changed and cost."""
    header = ("run", "implementer", "status", "elapsed", "changes", "tokens", "last event")
    body = []
    for state in states:
        who = state["implementer"] or "?"
        if state["lane"]:
            who += f" ({state['lane']})"
        tokens = state.get("tokens")
        body.append((state["id"] or os.path.basename(state["outDir"]), who, state["status"],
                     _elapsed(state["elapsedSeconds"]), _changed(state),
                     "-" if tokens is None else str(tokens), state["lastEvent"]))  # fmt: skip
    fixed_columns = len(header) - 1
    widths = [max(len(r[i]) for r in (header, *body)) for i in range(fixed_columns)]
    lines = []
    for cells in (header, *body):
        fixed = "  ".join(f"{c:<{w}}" for c, w in zip(cells[:-1], widths, strict=True))
        line = f"{fixed}  {cells[-1]}".rstrip()
        lines.append(line if len(line) <= width else line[: width - 1] + "…")
    return lines


class Live:
    """Draws the table over itself on a terminal; says only what changed on a pipe.

    `on_end(state)` is called once for each run, the first time it is seen ended.
    """

    def __init__(
        self,
        write: Callable[[str], None],
        tty: bool,
        width: int = 120,
        on_end: Callable[[dict], None] | None = None,
    ) -> None:
        self.write, self.tty, self.width = write, tty, width
        self.on_end = on_end
        self.drawn = 0
        self.status: dict[str, str] = {}
        self.ended: set[str] = set()

    def update(self, states: list[dict]) -> None:
        self._say(states)
        for state in states:
            if state["status"] != "running" and state["outDir"] not in self.ended:
                self.ended.add(state["outDir"])
                if self.on_end is not None:
                    self.on_end(state)

    def _say(self, states: list[dict]) -> None:
        news = []
        for state in states:
            before = self.status.get(state["outDir"])
            now = state["status"]
            name = state["id"] or state["outDir"]
            if before is None and now == "running":
                news.append(f"started {name} ({state['implementer']})")
            elif before != now and now != "running":
                news.append(f"{BELL if self.tty else ''}{name} ended: {now}")
            self.status[state["outDir"]] = now
        if not self.tty:
            for line in news:
                self.write(line + "\n")
            return
        clear = _UP_AND_CLEAR.format(n=self.drawn) if self.drawn else ""
        shown = [*news, *table(states, self.width)]
        self.write(clear + "".join(line + "\n" for line in shown))
        self.drawn = len(shown) - len(news)  # the news lines stay above the table


def watch(
    out_dirs: Callable[[], list[str]],
    write: Callable[[str], None] = sys.stderr.write,
    tty: bool | None = None,
    interval: float = 1.0,
    until_idle: bool = True,
    on_end: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Show the runs `out_dirs()` names until none is running; their last states.
    `on_end(state)` is called once for each run that ends."""
    live = Live(write, sys.stderr.isatty() if tty is None else tty, _columns(), on_end)
    while True:
        states = rows(out_dirs())
        live.update(states)
        if until_idle and not any(s["status"] == "running" for s in states):
            return states
        time.sleep(interval)


def _columns() -> int:
    try:
        return os.get_terminal_size(2).columns or 120  # a pseudo-terminal may say 0
    except OSError:
        return 120


class LiveWhile:
    """A live table of a fanout's or batch's runs on stderr while they run (a terminal only)."""

    def __init__(self, out_dirs: Callable[[], list[str]], interval: float = 1.0) -> None:
        self.out_dirs, self.interval = out_dirs, interval
        self._stop = threading.Event()
        self._live = Live(sys.stderr.write, True, _columns())
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._live.update(rows(self.out_dirs()))
            self._stop.wait(self.interval)

    def __enter__(self) -> LiveWhile:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._live.update(rows(self.out_dirs()))  # the end of every run, shown


def notifier(enabled: bool) -> Callable[[dict], None] | None:
    """What tells the user a run ended under --notify (None without it), for fanout, batch
    and `runs watch`: it takes a fanout row or a watch state. The settings are read and
    checked now, so a bad `notify` stops the command before any run starts (UserError)."""
    if not enabled:
        return None
    from .. import notify
    from ..runs.view import RESULT_FILE
    from ..runstore.outdirs import by_out_dir

    settings = notify.load()

    def ended(row: dict) -> None:
        out_dir = row.get("outDir")
        if not out_dir:
            return
        run_id = row.get("id")
        if run_id is None:
            try:
                record = by_out_dir(out_dir)
            except (OSError, UserError):
                record = None
            run_id = record.id if record is not None else None
        implementer, status = row.get("implementer") or "?", row.get("status") or "?"
        seconds = row.get("durationSeconds", row.get("elapsedSeconds"))
        line = notify.summary_line(implementer, status, row.get("lane"), seconds, run_id,
                                   row.get("task"))  # fmt: skip
        notify.notify(os.path.join(out_dir, RESULT_FILE), status, run_id, implementer, line,
                      settings=settings)  # fmt: skip

    return ended
