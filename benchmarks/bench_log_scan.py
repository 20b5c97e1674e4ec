"""How fast, and in how little memory, `oomdoctor diagnose --json` reads big logs, next to grep on the same file.

For each size (10 MB, 100 MB, 1 GiB by default) and each kind of log:

- ``info``: plain per-step lines (DeepSpeed's ``log_dist`` step line, a Trainer loss dict every 10 steps);
- ``tqdm``: a ``nohup.out`` of tqdm redraws (``\\r`` runs, no ``\\n`` between them) and loss dicts;
- ``ranks``: a multi-rank log, every line ``[rankN]:``-prefixed, ranks interleaved, bars and loss dicts;

the demo's banner (configs/demo/train.log) is written first and the demo's OOM traceback last. The log is
generated in a temporary folder, measured, and deleted before the next one. Each figure is the median of
``--repeat`` runs, the tool and ``grep -c OutOfMemory`` alternating, so both see the same page cache and load;
peak RSS is the child's own (``wait4``). Ratios are to grep in the same run. Also: the start-up (the demo log
itself, and what a 10 MB log adds to it) and the reader's time on one 1 MB progress-bar line.

    python benchmarks/bench_log_scan.py                    # 10 MB, 100 MB, 1 GiB
    python benchmarks/bench_log_scan.py --sizes 10M 100M   # quicker
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo" / "train.log"
TOTAL = 50_000_000
UNITS = {"K": 1024, "M": 1000**2, "G": 1024**3}


def demo_parts() -> tuple[str, str]:
    """The demo log's banner (up to the training loop) and its failure (from the traceback to the end)."""
    text = DEMO.read_text(encoding="utf-8")
    loop = text.index("  0%|")
    failure = text.index("Traceback (most recent call last)")
    banner = text[:loop].replace("Total optimization steps = 50", f"Total optimization steps = {TOTAL:,}")
    return banner, "\n" + text[failure:]


def info_block(step: int) -> str:
    out = []
    for s in range(step, step + 1000):
        out.append(
            f"[2026-11-12 15:00:00,000] [INFO] [logging.py:128:log_dist] [Rank 0] step={s}, skipped=0, "
            f"lr=[4.9e-05], mom=[(0.9, 0.999)]\n"
        )
        if s % 10 == 0:
            out.append(
                f"{{'loss': {1 + 1000 / s:.4f}, 'grad_norm': 0.4512, 'learning_rate': 4.9e-05, 'epoch': {s / 1e6:.4f}}}\n"
            )
    return "".join(out)


def tqdm_block(step: int) -> str:
    out = []
    for s in range(step, step + 1000):
        out.append(f"\r  0%|▏         | {s}/{TOTAL} [1:02:03<9:59:59,  6.02s/it]")
        if s % 10 == 0:
            out.append(
                f"\r{' ' * 45}\r{{'loss': '{1 + 1000 / s:.4f}', 'grad_norm': '0.4512', 'learning_rate': '4.9e-05', "
                f"'epoch': '{s / 1e6:.4f}'}}\n"
            )
    return "".join(out)


def ranks_block(step: int) -> str:
    out = []
    for s in range(step, step + 1000):
        out.append(f"[rank0]:   0%|▏         | {s}/{TOTAL} [1:02:03<9:59:59,  6.02s/it]\n")
        if s % 10 == 0:
            for r in range(8):
                out.append(
                    f"[rank{r}]: {{'loss': {1 + 1000 / s:.4f}, 'grad_norm': 0.4512, 'epoch': {s / 1e6:.4f}}}\n"
                )
    return "".join(out)


KINDS: dict[str, Callable[[int], str]] = {"info": info_block, "tqdm": tqdm_block, "ranks": ranks_block}


def write_log(path: Path, kind: str, size: int) -> None:
    banner, failure = demo_parts()
    block = KINDS[kind]
    with open(path, "w", encoding="utf-8") as fh:
        written = fh.write(banner)
        step = 1
        while written < size - len(failure):
            written += fh.write(block(step))
            step += 1000
        if kind == "ranks":
            failure = "".join(f"[rank3]: {line}\n" for line in failure.splitlines())
        fh.write(failure)


GNU_TIME = Path("/usr/bin/time").exists()


def run_child(argv: list[str]) -> tuple[float, float, int, bytes]:
    """Wall seconds (this clock, GNU time's has 10 ms steps), CPU seconds (user + system), peak RSS in bytes
    and stdout of one child process.

    GNU time reports the child's own peak RSS; ``wait4`` from Python would count the pages the forked
    child shared with this process before it exec'd (some 25 MiB)."""
    if GNU_TIME:
        argv = ["/usr/bin/time", "-f", "%e %U %S %M", *argv]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if GNU_TIME:
        fields = err.decode(errors="replace").strip().splitlines()[-1].split()
        return wall, float(fields[1]) + float(fields[2]), int(fields[3]) * 1024, out
    return wall, 0.0, 0, out


def diagnose_argv(log: Path) -> list[str]:
    return [sys.executable, "-m", "oomdoctor.cli", "diagnose", "--json", "--log", str(log)]


def measure(log: Path, repeat: int) -> dict[str, float]:
    """Medians of the tool's and grep's wall and CPU seconds, their peak RSS; runs alternate."""
    tool, grep = [], []
    out = b""
    for _ in range(repeat):
        wall, cpu, rss, out = run_child(diagnose_argv(log))
        tool.append((wall, cpu, rss))
        grep.append(run_child(["grep", "-c", "OutOfMemory", str(log)])[:3])
    med = statistics.median
    return {
        "wall": med(t[0] for t in tool),
        "cpu": med(t[1] for t in tool),
        "rss": max(t[2] for t in tool),
        "gwall": med(g[0] for g in grep),
        "gcpu": med(g[1] for g in grep),
        "grss": max(g[2] for g in grep),
        "out": out,  # type: ignore[dict-item]
    }


def parse_size(text: str) -> int:
    unit = text[-1].upper()
    return int(float(text[:-1]) * UNITS[unit]) if unit in UNITS else int(text)


def human(size: int) -> str:
    return f"{size / 1024**3:.0f} GiB" if size >= 1024**3 else f"{size / 1000**2:.0f} MB"


def facts_line(out: bytes) -> str:
    import json

    try:
        d = json.loads(out)
    except ValueError:
        return "no JSON"
    return f"oom={d.get('oom')} phase={d.get('phase')} step={d.get('step')}"


def rows(folder: Path, sizes: list[int], repeat: int) -> Iterator[str]:
    for size in sizes:
        for kind in KINDS:
            log = folder / f"{kind}.log"
            write_log(log, kind, size)
            m = measure(log, repeat)
            cpu_ratio = f"x{m['cpu'] / m['gcpu']:5.1f}" if m["gcpu"] else "  n/a"
            yield (
                f"{human(size):>7} {kind:<6} | {m['wall']:6.2f} s {m['cpu']:6.2f} s {m['rss'] / 1024**2:5.0f} MiB | "
                f"{m['gwall']:6.2f} s {m['gcpu']:6.2f} s {m['grss'] / 1024**2:4.0f} MiB | "
                f"x{m['wall'] / m['gwall']:5.1f} {cpu_ratio} | {facts_line(m['out'])}"  # type: ignore[arg-type]
            )
            log.unlink()


def startup(folder: Path, repeat: int) -> Iterator[str]:
    """The demo itself, and a 10 MB log: what the log's size adds to the start-up (wall and CPU)."""
    small = [run_child(diagnose_argv(DEMO))[:2] for _ in range(repeat)]
    log = folder / "ten.log"
    write_log(log, "tqdm", 10 * 1000**2)
    ten = [run_child(diagnose_argv(log))[:2] for _ in range(repeat)]
    log.unlink()
    med = statistics.median
    s_wall, s_cpu = med(w for w, _ in small), med(c for _, c in small)
    t_wall, t_cpu = med(w for w, _ in ten), med(c for _, c in ten)
    yield (
        f"start-up: diagnose --json on the demo log {s_wall * 1000:.0f} ms wall, {s_cpu * 1000:.0f} ms CPU; "
        f"on a 10 MB log {t_wall * 1000:.0f} ms wall, {t_cpu * 1000:.0f} ms CPU "
        f"(adds {(t_wall - s_wall) * 1000:+.0f} ms wall, {(t_cpu - s_cpu) * 1000:+.0f} ms CPU)"
    )


def bar_line(folder: Path, repeat: int) -> Iterator[str]:
    """One progress-bar line of 1 MB (a nohup.out whose bars never got a newline)."""
    from oomdoctor.facts.log import read_log

    log = folder / "bar.log"
    bar = "  5%|" + "█" * ((1000**2 - 40) // 3) + "| 5/100 [00:10<03:10,  2.00s/it]\n"
    log.write_text(bar, encoding="utf-8")
    read_log(log)  # tables compiled once
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        facts = read_log(log)
        times.append(time.perf_counter() - t0)
    grep = statistics.median(run_child(["grep", "-c", "OutOfMemory", str(log)])[0] for _ in range(repeat))
    reader = statistics.median(times)
    yield (
        f"one 1 MB bar line: read_log {reader * 1000:.1f} ms (in process), grep -c {grep * 1000:.1f} ms (a process); "
        f"good_steps={facts.good_steps}"
    )
    log.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["10M", "100M", "1G"], help="log sizes (K/M/G suffix)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="oomdoctor-bench-"))
    try:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(
            f"{os.cpu_count()} CPUs, load average {load:.1f}; python {sys.version.split()[0]}; "
            f"baseline: grep -c OutOfMemory on the same file; medians of {args.repeat} runs"
        )
        for line in startup(folder, args.repeat):
            print(line, flush=True)
        for line in bar_line(folder, args.repeat):
            print(line, flush=True)
        print(
            "   size kind   | diagnose: wall    CPU   peak RSS |   grep: wall    CPU  RSS | wall   CPU ratio | facts"
        )
        for line in rows(folder, [parse_size(s) for s in args.sizes], args.repeat):
            print(line, flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
