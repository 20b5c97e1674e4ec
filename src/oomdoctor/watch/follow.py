"""Follow a training's log and ``trainer_log.jsonl`` as they grow: only the new bytes are read each frame.

The console log gives the Trainer's progress bar (``4/10 [00:02<00:03, ...]``), the loss dicts, the
evaluation banner and allocator counters; ``trainer_log.jsonl`` gives LLaMA-Factory's records (step, total,
loss, remaining time, and with ``RECORD_VRAM=1`` the peak allocated/reserved GiB). A file that shrinks was
rewritten (``overwrite_output_dir``): it is read again from its start.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# One read at most per frame: a log that grew by more is caught up over the next frames.
MAX_READ_BYTES = 4 * 1024 * 1024
# Trainer / tqdm progress: "  40%|####      | 4/10 [00:02<00:03,  1.9it/s]"
PROGRESS = re.compile(r"(\d+)/(\d+) \[(\d[\d:]*)<(\d[\d:]*|\?)")
TOTAL_STEPS = re.compile(r"Total optimization steps = ([\d,]+)")
LOSS_DICT = re.compile(r"\{'loss': '?([0-9.eE+-]+)")
EVAL_BANNER = "***** Running Evaluation *****"
TRAIN_BANNER = "***** Running training *****"
SAVE_BANNER = re.compile(r"Saving model checkpoint to")


def clock_to_s(text: str) -> float | None:
    """tqdm's ``01:02:03`` / ``02:03`` to seconds."""
    try:
        parts = [int(p) for p in text.split(":")]
    except ValueError:
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + part
    return float(seconds)


def hms_to_s(text: Any) -> float | None:
    """LLaMA-Factory's ``remaining_time`` (``str(timedelta)``: ``0:01:02`` or ``1 day, 0:01:02``)."""
    if not isinstance(text, str):
        return None
    days = 0
    if "day" in text:
        head, _, text = text.partition(",")
        try:
            days = int(head.split()[0])
        except (ValueError, IndexError):
            return None
    value = clock_to_s(text.strip())
    return None if value is None else value + days * 86400


class GrowingFile:
    """New complete lines of a file since the last read (``\\r`` progress redraws count as lines)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.bytes_read = 0

    def new_lines(self) -> list[str]:
        try:
            size = self.path.stat().st_size
        except OSError:
            return []
        if size < self._offset:  # rewritten from the start
            self._offset, self._partial = 0, b""
        if size == self._offset:
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read(min(size - self._offset, MAX_READ_BYTES))
        self._offset += len(data)
        self.bytes_read += len(data)
        data = self._partial + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if cut < 0:
            self._partial = data
            return []
        self._partial = data[cut + 1 :]
        text = data[: cut + 1].decode("utf-8", errors="replace")
        return [line for line in re.split(r"[\r\n]+", text) if line.strip()]


@dataclass
class Progress:
    """What the log says so far about where the run is."""

    step: int | None = None
    total_steps: int | None = None
    loss: float | None = None
    eta_s: float | None = None
    training_started: bool = False
    in_eval: bool = False
    saving: bool = False
    retries: int = 0  # the highest allocator retry count read so far (cumulative counters) or their sum
    vram_reserved_mib: float | None = None  # RECORD_VRAM peak reserved (PyTorch), latest record
    vram_allocated_mib: float | None = None
    lines_read: int = 0
    tail: list[str] = field(default_factory=list)  # the last lines, for the screen


def retries_in(lines: list[str]) -> int:
    """Allocator retries/flushes in these lines, read by the log reader's own markers."""
    from oomdoctor.facts.log import parse_log_text

    text = "\n".join(line for line in lines if "retr" in line or "flush" in line)
    return parse_log_text(text).alloc_retries if text else 0


class LogFollower:
    """The console log (the Trainer's bar, loss dicts, banners, allocator counters)."""

    def __init__(self, path: Path, progress: Progress) -> None:
        self.file = GrowingFile(path)
        self.progress = progress

    def poll(self) -> None:
        lines = self.file.new_lines()
        if not lines:
            return
        p = self.progress
        p.lines_read += len(lines)
        p.tail = (p.tail + lines)[-20:]
        for line in lines:
            self._read_line(line)
        chunk = retries_in(lines)
        # flush warnings count events since the last step (they add up); memory_stats/summary counters are
        # cumulative (the largest is the count)
        p.retries = (
            p.retries + chunk if any("flushes since last step" in x for x in lines) else max(p.retries, chunk)
        )

    def _read_line(self, line: str) -> None:
        p = self.progress
        if TRAIN_BANNER in line:
            p.training_started = True
        m = TOTAL_STEPS.search(line)
        if m:
            p.total_steps = int(m.group(1).replace(",", ""))
        if EVAL_BANNER in line:
            p.in_eval = True
        if SAVE_BANNER.search(line):
            p.saving = True
        m = LOSS_DICT.search(line)
        if m:
            p.loss = float(m.group(1))
        for m in PROGRESS.finditer(line) if p.training_started else ():  # before: tokenizer and loading bars
            done, total = int(m.group(1)), int(m.group(2))
            if p.total_steps is not None and total != p.total_steps:
                continue  # the evaluation's own bar (eval batches), not training steps
            if p.step is not None and done > p.step:
                p.in_eval = p.saving = False  # training moved on
            p.step, p.total_steps = done, total
            remaining = clock_to_s(m.group(4))
            if remaining is not None:
                p.eta_s = remaining


class TrainerLogFollower:
    """LLaMA-Factory's ``trainer_log.jsonl`` (one JSON record a line)."""

    def __init__(self, path: Path, progress: Progress) -> None:
        self.file = GrowingFile(path)
        self.progress = progress

    def poll(self) -> None:
        for line in self.file.new_lines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                self._apply(record)

    def _apply(self, r: dict[str, Any]) -> None:
        p = self.progress
        if "eval_loss" not in r and "loss" not in r and "vram_reserved" not in r:
            return  # a prediction-loop progress record counts eval batches, not training steps
        p.training_started = True
        if isinstance(r.get("current_steps"), int):
            if p.step is None or r["current_steps"] > p.step:
                p.in_eval = p.saving = False
            p.step = r["current_steps"]
        if isinstance(r.get("total_steps"), int):
            p.total_steps = r["total_steps"]
        if isinstance(r.get("loss"), (int, float)):
            p.loss = float(r["loss"])
        eta = hms_to_s(r.get("remaining_time"))
        if eta is not None:
            p.eta_s = eta
        if isinstance(r.get("vram_reserved"), (int, float)) and r["vram_reserved"] >= 0:
            p.vram_reserved_mib = float(r["vram_reserved"]) * 1024
        if isinstance(r.get("vram_allocated"), (int, float)):
            p.vram_allocated_mib = float(r["vram_allocated"]) * 1024
        if isinstance(r.get("num_alloc_retries"), int):
            p.retries = max(p.retries, r["num_alloc_retries"])
