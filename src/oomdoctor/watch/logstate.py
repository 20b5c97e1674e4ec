"""Is a run still writing its log? For a run no visible process names (launched from another container, or by
a scheduler whose command line does not name the config): its console log or ``trainer_log.jsonl`` was written
within the last minute and shows no end of training (finished, a traceback, an out-of-memory). From the files
alone, their mtimes and the log's tail: no waiting. The thresholds are data (``rules/live/warnings.yaml``
``log_only``); the end of training comes from ``facts/log_markers.yaml`` (its ``after_train`` marker) and the
log reader.
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONSOLE_LOG_NAMES = ("running_log.txt", "train.log", "nohup.out")
TRAINER_LOG = "trainer_log.jsonl"


def console_logs(log_path: Path | None, output_dir: Path | None) -> list[Path]:
    """The run's console log: the one given, else the first of the usual names in its folder."""
    if log_path is not None and not log_path.is_dir():
        return [log_path]
    folder = log_path or output_dir
    if folder is None:
        return []
    return [folder / name for name in CONSOLE_LOG_NAMES if (folder / name).is_file()][:1]


def trainer_log(log_path: Path | None, output_dir: Path | None) -> Path | None:
    folder = log_path if log_path is not None and log_path.is_dir() else output_dir
    if folder is None or not (folder / TRAINER_LOG).is_file():
        return None
    return folder / TRAINER_LOG


@functools.lru_cache(maxsize=1)
def _settings() -> dict[str, Any]:
    from oomdoctor.watch.advice import load_spec

    return dict(load_spec()["log_only"])


def _finished_pattern() -> re.Pattern[str]:
    """The log marker of a finished training (``after_train`` in facts/log_markers.yaml)."""
    from oomdoctor.facts.log_tables import tables

    return next(m.pattern for m in tables().markers if m.context == "after_train")


OVERLAP_BYTES = 512  # a marker cut at the last look is read again whole (markers are shorter)


class TailReader:
    """Each log's bytes since the last look (the last ``tail_bytes`` the first time): a watcher following a
    log alone reads only what was added, not the whole tail every frame."""

    def __init__(self) -> None:
        self._seen: dict[Path, int] = {}

    def new_text(self, path: Path) -> str | None:
        """What was added since the last look (with an overlap), or None when nothing was."""
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            last = self._seen.get(path)
            if last == size:
                return None
            fresh = last is None or size < last  # first look, or the file was rewritten
            fh.seek(
                max(0, size - int(_settings()["tail_bytes"]))
                if last is None or fresh
                else max(0, last - OVERLAP_BYTES)
            )
            self._seen[path] = size
            return fh.read(size - fh.tell()).decode("utf-8", errors="replace")


def _tail(path: Path, reader: TailReader | None) -> str:
    return (reader or TailReader()).new_text(path) or ""


def console_shows_end(text: str) -> bool:
    """The text says training is over: finished, or failed (a traceback, an out-of-memory, a kill)."""
    from oomdoctor.facts.log import parse_log_text

    if _finished_pattern().search(text) or any(line in text for line in _settings()["end_lines"]):
        return True
    facts = parse_log_text(text)
    return bool(facts.oom or facts.other_error or facts.traceback_cut)


def jsonl_shows_end(text: str) -> bool:
    """trainer_log.jsonl's last record has reached its total steps."""
    for line in reversed(text.splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("current_steps"), int):
            total = record.get("total_steps")
            return isinstance(total, int) and record["current_steps"] >= total
    return False


@dataclass(frozen=True)
class LogState:
    path: Path | None  # the run's log written last (console log or trainer_log.jsonl)
    age_s: float | None  # seconds since it was written
    ended: bool  # a log shows the end of training

    def written_within(self, seconds: float) -> bool:
        return self.age_s is not None and self.age_s <= seconds


def log_state(
    console: list[Path],
    jsonl: Path | None,
    *,
    within_s: float,
    now: float | None = None,
    reader: TailReader | None = None,
) -> LogState:
    """The newest write among the run's logs and, when it is within ``within_s``, whether they show the end
    of training (an older log is not read). With a ``reader``, only what was added since its last look is
    read (the end of training comes last), so a caller that looks every second keeps it cheap."""
    now = time.time() if now is None else now
    stamped = []
    for path in [*console, *([jsonl] if jsonl else [])]:
        try:
            stamped.append((path.stat().st_mtime, str(path)))
        except OSError:
            continue
    if not stamped:
        return LogState(None, None, False)
    mtime, newest = max(stamped)
    age = max(0.0, now - mtime)
    if age > within_s:
        return LogState(Path(newest), age, False)
    try:
        ended = any(console_shows_end(_tail(p, reader)) for p in console if p.is_file())
        ended = ended or (jsonl is not None and not console and jsonl_shows_end(_tail(jsonl, reader)))
    except OSError:
        ended = False
    return LogState(Path(newest), age, ended)


def recent_s() -> float:
    return float(_settings()["recent_s"])


def stale_s() -> float:
    return float(_settings()["stale_s"])


def log_is_live(log_path: Path | None, output_dir: Path | None, *, now: float | None = None) -> bool:
    """The run's log was written within ``log_only.recent_s`` and shows no end of training."""
    state = log_state(
        console_logs(log_path, output_dir), trainer_log(log_path, output_dir), within_s=recent_s(), now=now
    )
    return state.written_within(recent_s()) and not state.ended
