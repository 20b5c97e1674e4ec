"""How fast the log reader is: start-up, a small log, a 1 GB log read from its tail, a full streamed scan.

Writes a realistic 1 GB training log (banner, tqdm redraws, loss lines, allocator warnings, the OOM at the end)
into a temporary folder, prints the figures next to ``grep -c`` on the same file, and deletes the folder.

    python benchmarks/bench_log_scan.py            # 1 GB
    python benchmarks/bench_log_scan.py --gb 0.2   # smaller, quicker
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANNER = """[INFO|2026-11-12 14:03:09] llamafactory.hparams.parser:523 >> Process rank: 0, world size: 1, device: cuda:0, distributed training: False, compute dtype: torch.float16
[INFO|2026-11-12 14:03:17] llamafactory.model.model_utils.checkpointing:144 >> Gradient checkpointing enabled.
[INFO|2026-11-12 14:03:17] llamafactory.model.loader:144 >> trainable params: 5,046,272 || all params: 601,096,192 || trainable%: 0.8395
[INFO|trainer.py:1469] 2026-11-12 14:03:18,812 >> ***** Running training *****
[INFO|trainer.py:1470] 2026-11-12 14:03:18,812 >>   Num examples = 1,600,000
[INFO|trainer.py:1473] 2026-11-12 14:03:18,812 >>   Instantaneous batch size per device = 4
[INFO|trainer.py:1476] 2026-11-12 14:03:18,812 >>   Total train batch size (w. parallel, distributed & accumulation) = 32
[INFO|trainer.py:1477] 2026-11-12 14:03:18,812 >>   Gradient Accumulation steps = 8
[INFO|trainer.py:1478] 2026-11-12 14:03:18,812 >>   Total optimization steps = 50,000,000
"""
FAILURE = """Traceback (most recent call last):
  File "/env/site-packages/transformers/trainer.py", line 1909, in training_step
    loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)
  File "/env/site-packages/transformers/loss/loss_utils.py", line 36, in fixed_cross_entropy
    loss = nn.functional.cross_entropy(source, target, ignore_index=ignore_index, reduction=reduction)
  File "/env/site-packages/torch/nn/functional.py", line 3561, in cross_entropy
    return torch._C._nn.cross_entropy_loss(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.17 GiB. GPU 0 has a total capacity of 31.74 GiB of which 1.32 GiB is free. Including non-PyTorch memory, this process has 30.41 GiB memory in use. Of the allocated memory 26.02 GiB is allocated by PyTorch, and 3.87 GiB is reserved by PyTorch but unallocated.
"""
TOTAL_STEPS = 50_000_000


def write_big_log(path: Path, target_bytes: int) -> int:
    """Training progress until the file reaches ``target_bytes``; returns the last completed step."""
    step = 0
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        written += fh.write(BANNER)
        while written < target_bytes:
            parts = []
            for _ in range(2000):
                step += 1
                pct = step * 100 // TOTAL_STEPS
                parts.append(f"\r{pct:3d}%|▏         | {step}/{TOTAL_STEPS} [1:02:03<9:59:59,  6.02s/it]")
                if step % 10 == 0:
                    parts.append(
                        "\r                                             \r"
                        f"{{'loss': '{1 + 1000 / step:.4f}', 'grad_norm': '0.4512', 'learning_rate': '4.9e-05', "
                        f"'epoch': '{step / 1_000_000:.4f}'}}\n"
                    )
                if step % 5000 == 0:
                    parts.append(
                        "[2026-11-12 15:00:00,000] [WARNING] [stage3.py:2139:step] 1 pytorch allocator cache flushes "
                        "since last step. this happen when there is high memory pressure\n"
                    )
            written += fh.write("".join(parts))
        written += fh.write("\n" + FAILURE)
    return step


def timed(fn, repeat: int) -> float:
    """Median wall seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="size of the generated log in GiB (default 1)")
    parser.add_argument("--no-full-scan", action="store_true", help="skip the streamed full scan")
    args = parser.parse_args()

    python = sys.executable
    bare = timed(lambda: subprocess.run([python, "-c", "pass"], check=True), 5)
    start = timed(lambda: subprocess.run([python, "-c", "import oomdoctor.facts.log"], check=True), 5)
    print(
        f"start-up: python -c 'import oomdoctor.facts.log' {start * 1000:.0f} ms (bare interpreter {bare * 1000:.0f} ms)"
    )

    from oomdoctor.facts.log import read_log
    from oomdoctor.facts.log_tables import tables

    demo = Path(__file__).resolve().parents[1] / "configs" / "demo" / "train.log"
    t0 = time.perf_counter()
    tables()
    print(
        f"tables: log_markers.yaml loaded and compiled in {(time.perf_counter() - t0) * 1000:.1f} ms (once per process)"
    )
    small = timed(lambda: read_log(demo), 20)
    print(
        f"small log: read_log(configs/demo/train.log, {demo.stat().st_size / 1024:.0f} KiB) {small * 1000:.1f} ms"
    )

    folder = Path(tempfile.mkdtemp(prefix="oomdoctor-bench-"))
    try:
        big = folder / "nohup.out"
        t0 = time.perf_counter()
        last_step = write_big_log(big, int(args.gb * 1024**3))
        size = big.stat().st_size
        print(
            f"generated {size / 1024**3:.2f} GiB log ({last_step:,} steps) in {time.perf_counter() - t0:.1f} s"
        )

        facts = None

        def tail_read() -> None:
            nonlocal facts
            facts = read_log(big)

        tail_s = timed(tail_read, 3)
        assert facts is not None
        print(
            f"read_log tail (64 MiB + head): {tail_s:.2f} s -> oom={facts.oom} phase={facts.phase} "
            f"step={facts.step} truncated_read={facts.truncated_read} bytes_read={facts.bytes_read / 1024**2:.0f} MiB"
        )
        grep_s = timed(
            lambda: subprocess.run(
                ["grep", "-c", "out of memory", str(big)], capture_output=True, check=False
            ),
            3,
        )
        print(f"grep -c 'out of memory' (whole file): {grep_s:.2f} s = {size / 1024**2 / grep_s:.0f} MiB/s")
        if not args.no_full_scan:
            t0 = time.perf_counter()
            full = read_log(big, tail_bytes=None)
            full_s = time.perf_counter() - t0
            print(
                f"read_log full streamed scan: {full_s:.1f} s = {size / 1024**2 / full_s:.0f} MiB/s -> "
                f"phase={full.phase} step={full.step} alloc_retries={full.alloc_retries}"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
