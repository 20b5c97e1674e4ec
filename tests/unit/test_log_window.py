"""The grep-style reader (log_window: windows around byte hits, gaps summed up) gives the same facts as the
line-by-line reader on every log the project holds: case logs, the demo, the rule logs and the case excerpts.

Small window sizes make most of each log a gap, so the gap summaries are what is compared."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oomdoctor.facts import log as log_module
from oomdoctor.facts import log_window
from oomdoctor.facts.log_scan import LogScanner
from oomdoctor.facts.log_window import WindowSizes
from oomdoctor.facts.types import to_jsonable

ROOT = Path(__file__).resolve().parents[2]
CASE_LOGS = sorted(
    p for p in (ROOT / "tests" / "cases" / "logs").iterdir() if p.is_file() and p.suffix != ".yaml"
)
RULE_LOGS = sorted((ROOT / "tests" / "rules" / "logs").glob("*.txt"))
EXCERPTS = [
    (f"{f.stem}:{case['id']}", case["log_excerpt"])
    for f in sorted((ROOT / "tests" / "cases").glob("*.yaml"))
    for case in (yaml.safe_load(f.read_text(encoding="utf-8")) or [])
    if isinstance(case, dict) and isinstance(case.get("log_excerpt"), str) and case["log_excerpt"].strip()
]
TINY = WindowSizes(before=4, after=8, margin_bytes=1024, end=4, detail_chunk=512)


def _facts(path: Path, scan) -> dict:
    scanner = LogScanner()
    bytes_read, truncated, encoding = scan(scanner)
    facts = log_module._facts_from(
        scanner, path=str(path), bytes_read=bytes_read, truncated=truncated, encoding=encoding
    )
    return to_jsonable(facts)


def _both(path: Path, sizes: WindowSizes, tail: int = log_module.DEFAULT_TAIL_BYTES) -> tuple[dict, dict]:
    old = _facts(path, lambda s: log_module._scan_file_whole(path, s, tail))
    new = _facts(path, lambda s: log_module._scan_file(path, s, tail, sizes))
    return old, new


def test_the_needles_are_derived() -> None:
    assert log_window.available()


@pytest.mark.parametrize("sizes", [TINY, log_window.DEFAULT_SIZES], ids=["tiny", "default"])
@pytest.mark.parametrize("path", CASE_LOGS + [ROOT / "configs" / "demo" / "train.log"], ids=lambda p: p.name)
def test_same_facts_on_case_logs(path: Path, sizes: WindowSizes) -> None:
    old, new = _both(path, sizes)
    assert new == old


@pytest.mark.parametrize("path", RULE_LOGS, ids=lambda p: p.name)
def test_same_facts_on_rule_logs(path: Path) -> None:
    old, new = _both(path, TINY)
    assert new == old


@pytest.mark.parametrize(("name", "excerpt"), EXCERPTS, ids=[n for n, _ in EXCERPTS])
def test_same_facts_on_case_excerpts(tmp_path: Path, name: str, excerpt: str) -> None:
    path = tmp_path / "train.log"
    path.write_text(excerpt, encoding="utf-8")
    old, new = _both(path, TINY)
    assert new == old


def test_the_windows_leave_gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons are not vacuous: part of the demo and most of a progress log are summed up, not decoded."""
    decoded: list[int] = []
    real_feed = log_window._Reader.feed

    def counting_feed(self, start: int, end: int, line_start: int | None = None) -> None:
        decoded.append(end - start)
        real_feed(self, start, end, line_start)

    monkeypatch.setattr(log_window._Reader, "feed", counting_feed)
    demo = ROOT / "configs" / "demo" / "train.log"
    _facts(demo, lambda s: log_module._scan_file(demo, s, log_module.DEFAULT_TAIL_BYTES, TINY))
    assert 0 < sum(decoded) < demo.stat().st_size
    decoded.clear()
    big = _progress_log(tmp_path / "nohup.out", 3000)
    facts = _facts(big, lambda s: log_module._scan_file(big, s, log_module.DEFAULT_TAIL_BYTES))
    assert sum(decoded) < big.stat().st_size / 10
    assert (facts["oom_kind"], facts["good_steps"]) == ("killed", 3000)


def _progress_log(path: Path, steps: int, *, eval_every: int = 0) -> Path:
    lines = ["[INFO|trainer.py:1469] >> ***** Running training *****", "  Total optimization steps = 90000"]
    out = "\n".join(lines) + "\n"
    for n in range(1, steps + 1):
        out += f"\r  1%|▏         | {n}/90000 [00:10<00:50,  6.02s/it]"
        if n % 7 == 0:
            out += f"\r{' ' * 20}\r{{'loss': '{1 + 1 / n:.4f}', 'epoch': '{n / 9000:.3f}'}}\n"
        if eval_every and n % eval_every == 0:
            out += "\n***** Running Evaluation *****\n"
            out += "".join(f"\r {k * 10}%|█  | {k}/10 [00:01<00:09,  1.0it/s]" for k in range(0, 6))
            out += "\n"
    path.write_text(out + "Killed\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("eval_every", [0, 400])
def test_same_facts_on_long_progress_logs(tmp_path: Path, eval_every: int) -> None:
    path = _progress_log(tmp_path / "nohup.out", 3000, eval_every=eval_every)
    for sizes in (TINY, log_window.DEFAULT_SIZES):
        old, new = _both(path, sizes)
        assert new == old
    # and from the tail of a file too big for the budget
    old, new = _both(path, TINY, tail=16 * 1024)
    assert new == old and new["truncated_read"]


def test_a_window_inside_a_long_line_gets_the_line_start(tmp_path: Path) -> None:
    """A 1 MB progress line with no break: its "5%|" is 1 MB before the end window, and still read."""
    path = tmp_path / "nohup.out"
    path.write_text("  5%|" + "█" * 330_000 + "| 5/100 [00:10<03:10,  2.00s/it]\nKilled\n", encoding="utf-8")
    old, new = _both(path, log_window.DEFAULT_SIZES)
    assert new == old
    assert (new["good_steps"], new["oom_kind"]) == (5, "killed")
    assert not any("without its step count" in e for e in new["phase_evidence"])


def _lines_of_every_log() -> list[str]:
    texts = [p.read_bytes().decode("utf-8", errors="replace") for p in CASE_LOGS + RULE_LOGS if p.is_file()]
    texts += [excerpt for _, excerpt in EXCERPTS]
    return sorted({line for t in texts for line in t.replace("\r", "\n").split("\n") if line.strip()})


def test_a_line_without_a_needle_changes_nothing_the_gaps_drop() -> None:
    """The gaps keep only progress bars, loss dicts and step lines: every other line the scanner acts on must hold a
    needle. A new check in LogScanner._segment whose lines hold none fails here (add its regex to
    log_needles._scanner_needles)."""
    from oomdoctor.facts.log_needles import hit_pattern, step_counter_literals
    from oomdoctor.records import asdict

    finder = hit_pattern()
    summed = (b"%|", b"'loss':", b"s/it", b"it/s", *(step_counter_literals() or ()))  # gaps sum these up
    quiet = {"recent", "last_content_was_traceback"}
    fresh = {k: v for k, v in asdict(LogScanner().run).items() if k not in quiet}
    checked = 0
    for line in _lines_of_every_log():
        raw = line.encode("utf-8")
        if finder.search(raw) is not None or any(s in raw for s in summed):
            continue
        scanner = LogScanner()
        scanner.feed_text(line + "\n")
        after = {k: v for k, v in asdict(scanner.run).items() if k not in quiet}
        assert after == fresh, line
        checked += 1
    assert checked > 100


def test_the_re_fallback_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where google-re2 is not installed the needles are searched with ``re``: same windows, same facts."""
    import re

    from oomdoctor.facts import log_needles

    pattern = re.compile(
        b"|".join(re.escape(n) for n in log_needles.needle_bytes(log_needles._cached_needles()))
    )
    monkeypatch.setattr(log_window, "hit_pattern", lambda: pattern)
    for path in CASE_LOGS[:8] + [ROOT / "configs" / "demo" / "train.log"]:
        old, new = _both(path, TINY)
        assert new == old


def test_dense_hits_and_a_header_far_from_its_frames(tmp_path: Path) -> None:
    """Every line a hit (windows merge into one), and a traceback whose frame is further from its header
    than a margin (the header's window still reaches it)."""
    dense = tmp_path / "dense.log"
    dense.write_text(
        "".join(f"[INFO] step {i}: world size 8, Error count 0\n" for i in range(300))
        + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n",
        encoding="utf-8",
    )
    far = tmp_path / "far.log"
    far.write_text(
        "x = 1\nOutOfMemoryError      Traceback (most recent call last)\n"
        + "".join(f"    {n} plain context line\n" for n in range(7))
        + "[/usr/lib/python3/accelerate/utils/operations.py](https://localhost:8080/#) in _convert_to_fp32(t)\n"
        + "--> 781         return tensor.float()\n\n"
        + "OutOfMemoryError: CUDA out of memory. Tried to allocate 9.47 GiB.\n",
        encoding="utf-8",
    )
    for path in (dense, far):
        old, new = _both(path, TINY)
        assert new == old
