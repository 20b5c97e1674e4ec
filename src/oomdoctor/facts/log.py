"""Read a training log and say whether, when and how memory ran out.

Accepts console captures, ``nohup.out``, the WebUI's ``running_log.txt``, LLaMA-Factory's
``trainer_log.jsonl`` and an ``output_dir`` holding them. Big logs are read from the end only (the failure
is at the end; the banner at the start is read too), so a log of gigabytes costs what its last 16 MiB cost;
those bytes are searched the way grep does and only the windows around what matters are decoded
(``log_window.py``). ``tail_bytes=None`` streams the whole file instead, in chunks, line by line.

The knowledge (OOM forms, frames, markers) is in ``log_markers.yaml``; the line handling in
``log_text.py``, the scanning in ``log_scan.py`` and the phase decision in ``log_phase.py``.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from oomdoctor.errors import BadInput
from oomdoctor.facts import log_window
from oomdoctor.facts.log_gather import whole_model_gather
from oomdoctor.facts.log_oom import parse_oom_numbers
from oomdoctor.facts.log_phase import Frame, PhaseResult, decide, text
from oomdoctor.facts.log_reassemble import reassemble
from oomdoctor.facts.log_scan import Failure, LogScanner, Run
from oomdoctor.facts.log_tables import Tables, tables
from oomdoctor.facts.log_text import bom_encoding, decode_block, looks_binary
from oomdoctor.facts.log_window import DEFAULT_SIZES, WindowSizes
from oomdoctor.facts.ranks import rank_report
from oomdoctor.facts.types import LogFacts, OtherProcess
from oomdoctor.i18n import both, msg
from oomdoctor.lazyre import lazy

DEFAULT_TAIL_BYTES = 16 * 1024**2  # hours of progress lines; bounds the reader's memory and time
HEAD_BYTES = 1024**2  # the banner (batch sizes, world size) sits at the start of a big log
STREAM_CHUNK_BYTES = 8 * 1024**2
TRAINER_LOG_MAX_BYTES = 16 * 1024**2
_SNIFF_BYTES = 64 * 1024
_LINE_BREAK = lazy(r"\r\n|[\r\n]")


def read_log(path: str | os.PathLike[str], *, tail_bytes: int | None = DEFAULT_TAIL_BYTES) -> LogFacts:
    """Read a log file (or a LLaMA-Factory output_dir). BadInput when missing, empty, binary or unreadable."""
    return _guarded(Path(path), tail_bytes, 0)[0]


def read_log_reassembling(path: str | os.PathLike[str], max_bytes: int) -> tuple[LogFacts, bool]:
    """``read_log``, except that a file of at most ``max_bytes`` whose text reassembly changes (a wrapped or
    glued message, bars ending in "\\r": ``log_reassemble.py``) is read as that text put back together, with
    its rank report. Such a file is read and scanned once. Returns the facts and whether they are of the
    reassembled text."""
    return _guarded(Path(path), DEFAULT_TAIL_BYTES, max_bytes)


def _guarded(p: Path, tail_bytes: int | None, reassemble_max_bytes: int) -> tuple[LogFacts, bool]:
    try:
        return _read_path(p, tail_bytes, reassemble_max_bytes)
    except OSError as err:  # permissions, a file removed while reading, ...
        raise BadInput(
            msg("log_unreadable", None, path=p, detail=err.strerror or type(err).__name__)
        ) from err


def _read_path(p: Path, tail_bytes: int | None, reassemble_max_bytes: int) -> tuple[LogFacts, bool]:
    if not p.exists():
        raise BadInput(msg("file_missing", None, what=both("what_log"), path=p))
    if p.is_dir():
        return _read_output_dir(p, tail_bytes), False
    if not p.is_file():
        raise BadInput(msg("not_a_file", None, path=p))
    size = p.stat().st_size
    if size == 0:
        raise BadInput(msg("log_empty", None, path=p))
    small = size <= reassemble_max_bytes and tail_bytes is not None and size <= tail_bytes
    if _is_trainer_log(p):
        facts = _facts_from(LogScanner(), path=str(p), trainer_log=_read_trainer_log(p), bytes_read=size)
        return _reassembled_instead(p, facts, _read_whole(p)) if small else (facts, False)
    if small:
        data = _read_whole(p)
        if looks_binary(data[:_SNIFF_BYTES]):  # what the scan refuses first (_scan_file, _scan_file_whole)
            raise BadInput(msg("log_binary", None, path=p))
        messy = _messy_text(data)
        if messy is not None:  # it holds an OOM message, so it is not empty either
            facts = _parse_text(*messy[:2], path=str(p))
            facts.bytes_read, facts.encoding = len(data), messy[2]
            return facts, True
    scanner = LogScanner()
    bytes_read, truncated, encoding = _scan_file(p, scanner, tail_bytes)
    facts = _facts_from(scanner, path=str(p), bytes_read=bytes_read, truncated=truncated, encoding=encoding)
    return facts, False


def _read_whole(p: Path) -> bytes:
    with _open_regular(p) as fh:
        return fh.read()


def _messy_text(data: bytes) -> tuple[str, str, str] | None:
    """(text, its reassembled text, encoding) of a log's bytes when reassembly changes the text, else None."""
    if looks_binary(data[:_SNIFF_BYTES]):
        return None
    text, encoding = decode_block(data, bom_encoding(data[:4]))
    reassembled = reassemble(text)
    return (text, reassembled, encoding) if reassembled != text else None


def _reassembled_instead(p: Path, facts: LogFacts, data: bytes) -> tuple[LogFacts, bool]:
    """A trainer_log.jsonl that reassembly changes is read as text, keeping what the file reader counted."""
    messy = _messy_text(data)
    if messy is None:
        return facts, False
    again = _parse_text(*messy[:2], path=str(p))
    again.bytes_read, again.encoding = facts.bytes_read, facts.encoding
    return again, True


def parse_log_text(text: str, *, path: str | None = None) -> LogFacts:
    """Read a log given as text (a pasted excerpt, a case file). Text that is a trainer_log.jsonl works too."""
    return _parse_text(text, None, path)


def _parse_text(text: str, reassembled: str | None, path: str | None) -> LogFacts:
    """``parse_log_text``, given ``reassemble(text)`` where the caller has it already."""
    records = _trainer_records(text)
    if records is not None:
        return _facts_from(LogScanner(), path=path, trainer_log=records, bytes_read=len(text))
    scanner = LogScanner()
    scanner.feed_text(reassemble(text) if reassembled is None else reassembled)
    facts = _facts_from(scanner, path=path, bytes_read=len(text))
    facts.ranks = rank_report(text)
    return facts


# ---------------------------------------------------------------------------------------------- files
def _scan_file(
    p: Path, scanner: LogScanner, tail_bytes: int | None, sizes: WindowSizes = DEFAULT_SIZES
) -> tuple[int, bool, str]:
    """Feed the file to the scanner: whole, head + tail, or streamed. Returns (bytes read, truncated, encoding).

    The head and the tail are read as bytes and searched the way grep does (``log_window``): only the
    windows around what matters are decoded, so a big log costs its tail budget's bytes, not its lines."""
    with _open_regular(p) as fh:
        sniff = fh.read(_SNIFF_BYTES)
    bom = bom_encoding(sniff)
    if tail_bytes is None or (bom and bom.startswith("utf-16")) or not log_window.available():
        return _scan_file_whole(p, scanner, tail_bytes)
    if looks_binary(sniff):
        raise BadInput(msg("log_binary", None, path=p))
    size = p.stat().st_size
    head_bytes = min(HEAD_BYTES, max(4096, tail_bytes // 8))  # never more than a fraction of the budget
    skip_bom = 3 if bom == "utf-8-sig" else 0
    with _open_regular(p) as fh:
        if size <= tail_bytes + head_bytes:
            data = fh.read()
            if not log_window.has_text(data, skip_bom, len(data)):
                raise BadInput(msg("log_empty", None, path=p))
            encoding = log_window.scan_region(data, skip_bom, len(data), scanner, bom, sizes)
            return len(data), False, encoding
        head = fh.read(head_bytes)
        fh.seek(size - tail_bytes)
        tail = fh.read()
    head_end = head.rfind(b"\n") + 1 or len(head)
    tail_start = _after_first_break(tail)
    if not (
        log_window.has_text(head, skip_bom, head_end) or log_window.has_text(tail, tail_start, len(tail))
    ):
        raise BadInput(msg("log_empty", None, path=p))
    log_window.scan_region(head, skip_bom, head_end, scanner, bom, sizes)
    scanner.gap()
    encoding = log_window.scan_region(tail, tail_start, len(tail), scanner, bom, sizes)
    return len(head) + len(tail), True, encoding


def _after_first_break(data: bytes) -> int:
    """Where the first whole line of a tail starts (its first line is partial)."""
    breaks = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
    if not breaks:
        return len(data)
    at = min(breaks)
    return at + 2 if data[at : at + 2] == b"\r\n" else at + 1


def _scan_file_whole(p: Path, scanner: LogScanner, tail_bytes: int | None) -> tuple[int, bool, str]:
    """The reader before log_window: every byte of the head and tail decoded and scanned line by line.
    Used for UTF-16 logs, for the full streamed scan, and by the tests that check both readers agree."""
    size = p.stat().st_size
    with _open_regular(p) as fh:
        head = fh.read(min(size, _SNIFF_BYTES))
        if looks_binary(head):
            raise BadInput(msg("log_binary", None, path=p))
        bom = bom_encoding(head)
        fh.seek(0)
        if tail_bytes is None:
            return _stream(fh, scanner, bom), False, bom or "utf-8"
        head_bytes = min(HEAD_BYTES, max(4096, tail_bytes // 8))  # never more than a fraction of the budget
        if size <= tail_bytes + head_bytes:
            data = fh.read()
            content, encoding = decode_block(data, bom)
            _require_text(content, p)
            scanner.feed_text(content)
            return len(data), False, encoding
        head_data = fh.read(head_bytes)
        start = size - tail_bytes
        if bom and bom.startswith("utf-16"):
            start -= start % 2
        fh.seek(start)
        tail_data = fh.read()
    head_text, encoding = decode_block(_to_last_newline(head_data, bom), bom)
    tail_text, encoding = decode_block(tail_data, bom)
    first_break = _LINE_BREAK.search(tail_text)
    tail_text = tail_text[first_break.end() :] if first_break else tail_text  # the first line is partial
    _require_text(head_text + tail_text, p)
    scanner.feed_text(head_text)
    scanner.gap()
    scanner.feed_text(tail_text)
    return len(head_data) + len(tail_data), True, encoding


def _open_regular(p: Path) -> BinaryIO:
    """Open a log for reading, refusing at once what is not a regular file: a FIFO would block the open (or
    the read) forever, a device never ends. The check is on the opened descriptor, so a file swapped for a
    FIFO after ``is_file()`` is refused too."""
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BadInput(msg("not_a_file", None, path=p))
    return os.fdopen(fd, "rb")


def _to_last_newline(data: bytes, encoding: str | None) -> bytes:
    newline = b"\n\x00" if encoding == "utf-16-le" else b"\x00\n" if encoding == "utf-16-be" else b"\n"
    cut = data.rfind(newline)
    return data[: cut + len(newline)] if cut >= 0 else data


def _stream(fh: Any, scanner: LogScanner, bom: str | None) -> int:
    """Full scan in fixed-size chunks cut at line ends: memory stays bounded whatever the file size."""
    total = 0
    if bom and bom.startswith("utf-16"):
        decoder = codecs.getincrementaldecoder(bom)(errors="replace")
        carry = ""
        while chunk := fh.read(STREAM_CHUNK_BYTES):
            total += len(chunk)
            content = carry + decoder.decode(chunk)
            cut = content.rfind("\n")
            carry, content = (content[cut + 1 :], content[: cut + 1]) if cut >= 0 else (content, "")
            scanner.feed_text(content.lstrip("\ufeff"))
        scanner.feed_text(carry + decoder.decode(b"", final=True))
        return total
    rest = b""
    while chunk := fh.read(STREAM_CHUNK_BYTES):
        total += len(chunk)
        data = rest + chunk
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))  # a bar-only log may have no "\n" for megabytes
        if cut < 0 and len(data) < 8 * STREAM_CHUNK_BYTES:
            rest = data
            continue
        cut = cut if cut >= 0 else len(data) - 1
        rest = data[cut + 1 :]
        scanner.feed_text(decode_block(data[: cut + 1], bom)[0])
    if rest:
        scanner.feed_text(decode_block(rest, bom)[0])
    return total


def _require_text(content: str, p: Path) -> None:
    if not content.strip():
        raise BadInput(msg("log_empty", None, path=p))


def _read_output_dir(d: Path, tail_bytes: int | None) -> LogFacts:
    t = tables()
    text_log = next(
        (d / n for n in t.output_dir_logs if (d / n).is_file() and (d / n).stat().st_size > 0), None
    )
    trainer_log = d / t.trainer_log
    has_trainer_log = trainer_log.is_file() and trainer_log.stat().st_size > 0
    if text_log is None and not has_trainer_log:
        names = ", ".join([*t.output_dir_logs, t.trainer_log])
        raise BadInput(msg("log_dir_empty", None, path=d, names=names))
    scanner = LogScanner()
    bytes_read, truncated, encoding = 0, False, None
    if text_log is not None:
        bytes_read, truncated, encoding = _scan_file(text_log, scanner, tail_bytes)
    records = _read_trainer_log(trainer_log) if has_trainer_log else None
    if records is not None:
        bytes_read += min(trainer_log.stat().st_size, TRAINER_LOG_MAX_BYTES)
    return _facts_from(
        scanner,
        path=str(text_log or trainer_log),
        trainer_log=records,
        bytes_read=bytes_read,
        truncated=truncated,
        encoding=encoding,
    )


# ---------------------------------------------------------------------------------------------- trainer_log.jsonl
def _is_trainer_log(p: Path) -> bool:
    if p.name.endswith(".jsonl"):
        return True
    with _open_regular(p) as fh:
        first = fh.read(4096).lstrip()
    return first.startswith(b'{"') and b'"current_steps"' in first


def _read_trainer_log(p: Path) -> list[dict[str, Any]]:
    size = p.stat().st_size
    with _open_regular(p) as fh:
        if size > TRAINER_LOG_MAX_BYTES:
            fh.seek(size - TRAINER_LOG_MAX_BYTES)
        data = fh.read()
    if b"\x00" in data[:8192]:
        raise BadInput(msg("log_binary", None, path=p))
    content = data.decode("utf-8", errors="replace")
    if size > TRAINER_LOG_MAX_BYTES:
        content = content[content.find("\n") + 1 :]
    records = _trainer_records(content)
    if records is None:
        if not content.strip():
            raise BadInput(msg("log_empty", None, path=p))
        records = []
    return records


def _trainer_records(content: str) -> list[dict[str, Any]] | None:
    """The JSON objects of a trainer_log.jsonl, or None when the text is not one (a pasted excerpt that starts
    with a record and goes on with other lines - the error - is a log to scan, its records step lines in it)."""
    stripped = content.lstrip()
    if not stripped.startswith('{"'):
        return None
    records: list[dict[str, Any]] = []
    for line in stripped.splitlines():
        line = line.strip()
        if not line:
            continue
        if not line.startswith("{"):
            return None
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # broken, or nested deeper than any record (json recurses)
            continue
        if isinstance(obj, dict):
            records.append(obj)
    if not records or not any("current_steps" in r for r in records):
        return None
    return records


def _number(value: Any) -> float | None:
    """A finite value of a sane size (NaN kept: a diverged loss is a reading); None for anything else."""
    if value is None or isinstance(value, (bool, dict, list)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number != number or abs(number) < 1e15 else None


# ---------------------------------------------------------------------------------------------- facts
def _facts_from(
    scanner: LogScanner,
    *,
    path: str | None,
    bytes_read: int,
    truncated: bool = False,
    encoding: str | None = None,
    trainer_log: list[dict[str, Any]] | None = None,
) -> LogFacts:
    run, runs_seen = scanner.result()
    f = LogFacts(
        path=path, bytes_read=bytes_read, truncated_read=truncated, encoding=encoding, runs_seen=runs_seen
    )
    _banner_facts(f, run)
    jsonl_steps = _apply_trainer_log(f, trainer_log) if trainer_log else None
    failure = run.failure
    if failure is None:
        _no_failure_facts(f, run, jsonl_steps)
        return f
    res = decide(failure, run, tables(), jsonl_steps=jsonl_steps)
    _failure_facts(f, failure, res, runs_seen)
    _traceback_facts(f, failure, res)
    if not failure.cut:
        _oom_message_facts(f, failure.message, run)
    return f


def _no_failure_facts(f: LogFacts, run: Run, jsonl_steps: int | None) -> None:
    """A log without a failure: how far the run got, and an error that is not an OOM."""
    snap = run.snap
    f.training_started = snap.training_started or f.training_started
    f.eval_started = snap.eval_started
    f.weights_loaded = True if snap.weights_loaded or f.training_started else None
    known = [n for n in (snap.train_steps, jsonl_steps) if n is not None]
    f.good_steps = max(known) if known else None
    f.other_error = run.other_error


def _failure_facts(f: LogFacts, failure: Failure, res: PhaseResult, runs_seen: int) -> None:
    """The failure's kind, line and phase (with its evidence), step and rank."""
    f.oom = not failure.cut
    f.traceback_cut = failure.cut
    f.oom_kind = res.kind
    f.ran_out_of = failure.ran_out_of
    f.error_type = res.error_type
    f.error_line = failure.line
    f.phase = res.phase
    f.phase_candidates = list(res.candidates)
    f.setup_step = res.setup_step
    f.phase_confidence = res.confidence
    f.phase_evidence_text = list(res.evidence)
    if runs_seen > 1:
        f.phase_evidence_text.append(text("log_ev_earlier_run", runs=runs_seen))
    f.phase_evidence = [e["en"] for e in f.phase_evidence_text]
    f.step = res.step
    f.good_steps = res.good_steps
    f.rank = failure.rank
    f.host = failure.host


def _traceback_facts(f: LogFacts, failure: Failure, res: PhaseResult) -> None:
    """What the traceback's frames and the snapshot at the failure tell."""
    fs = failure.snapshot
    f.frames = [fr.function for fr in res.frames if fr.function]
    f.whole_model_gather = whole_model_gather(res.frames)
    f.cpu_compute = res.kind == "cpu_alloc" and res.compute_role in ("forward", "loss")
    f.zero_stage = _zero_stage_of(res.frames, tables()) or f.zero_stage
    f.training_started = fs.training_started
    f.eval_started = fs.eval_started
    f.saving = fs.context == "save"
    f.weights_loaded = True if fs.weights_loaded else (False if res.phase == "load" else None)
    if failure.cut:
        f.other_error = None


def _oom_message_facts(f: LogFacts, message: str, run: Run) -> None:
    """The numbers of the OOM message, and the failing card's name where the log names each card."""
    n = parse_oom_numbers(message)
    f.requested_mib = n.requested_mib
    f.capacity_mib = n.capacity_mib
    f.free_mib = n.free_mib
    f.process_in_use_mib = n.process_in_use_mib
    f.allocated_mib = n.allocated_mib
    f.reserved_mib = n.reserved_mib
    f.reserved_unallocated_mib = n.reserved_unallocated_mib
    f.allowed_mib, f.private_pools_mib = n.allowed_mib, n.private_pools_mib
    f.current_active_mib = n.current_active_mib
    f.gpu_index = n.gpu_index
    if n.gpu_index is not None and n.gpu_index in run.card_names:
        f.card_name = run.card_names[n.gpu_index]  # the failing card, where the log names each card
    f.other_processes = [OtherProcess(pid=pid, used_mib=mib) for pid, mib in n.other_processes]


def _zero_stage_of(frames: list[Frame], t: Tables) -> int | None:
    """The ZeRO stage a traceback passes through (its DeepSpeed files or the optimizer it builds)."""
    for frame in frames:
        for contains, stage in t.zero_stage_files:
            if frame.path and contains in frame.path:
                return stage
        for contains, stage in t.zero_stage_code:
            if frame.code and contains in frame.code:
                return stage
    return None


def _banner_facts(f: LogFacts, run: Run) -> None:
    f.card_name = run.card_name
    f.zero_stage = run.zero_stage
    f.instantaneous_batch_size = run.instantaneous_batch_size
    f.gradient_accumulation_steps = run.gradient_accumulation_steps
    f.total_train_batch_size = run.total_train_batch_size
    f.num_examples = run.num_examples
    f.world_size = run.world_size
    f.launcher_world_size = run.launcher_world_size
    f.trainable_params = run.trainable_params
    f.all_params = run.all_params
    f.total_steps = run.total_steps or run.train_total
    f.gradient_checkpointing_logged = run.gradient_checkpointing_logged
    f.loading_shards = run.loading_shards
    f.last_loss = run.last_loss
    f.eval_loss = run.eval_loss
    f.train_runtime_s = run.train_runtime_s
    f.stopped_in = run.snap.context
    f.nonfinite_seen = run.nonfinite_seen
    f.stopped_on_warning = run.snap.context_warned
    f.fsdp_seen = run.fsdp_seen
    f.launched = run.launched
    f.export = run.snap.export
    f.resumed = run.resumed
    f.host_ram_percent, f.host_ram_used_gib = run.host_ram_percent, run.host_ram_used_gib
    f.data_parallel, f.data_parallel_gpus = run.data_parallel, run.data_parallel_gpus
    f.warnings = list(run.warnings)
    f.alloc_retries = run.alloc_retries + run.alloc_retries_max


def _apply_trainer_log(f: LogFacts, records: list[dict[str, Any]]) -> int | None:
    """Steps, losses and RECORD_VRAM peaks from trainer_log.jsonl. Returns the completed training steps."""
    steps = [
        int(r["current_steps"]) for r in records if "epoch" in r and isinstance(r.get("current_steps"), int)
    ]
    totals = [
        int(r["total_steps"]) for r in records if isinstance(r.get("total_steps"), int) and "epoch" in r
    ]
    if totals and f.total_steps is None:
        f.total_steps = totals[-1]
    losses = [v for r in records if (v := _number(r.get("loss"))) is not None]
    if losses and f.last_loss is None:
        f.last_loss = losses[-1]
    evals = [v for r in records if (v := _number(r.get("eval_loss"))) is not None]
    if evals and f.eval_loss is None:
        f.eval_loss = evals[-1]
    allocated = [v for r in records if (v := _number(r.get("vram_allocated"))) is not None]
    reserved = [v for r in records if (v := _number(r.get("vram_reserved"))) is not None]
    f.vram_allocated_gib = max(allocated) if allocated else None
    f.vram_reserved_gib = max(reserved) if reserved else None
    if steps:
        f.training_started = True
    return max(steps) if steps else None
