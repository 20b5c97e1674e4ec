"""``llamafactory-cli`` with this process's CUDA memory capped: ``python lf_capped.py --mib N train CONFIG``.

``torch.cuda.set_per_process_memory_fraction`` makes PyTorch's allocator fail (a real CUDA OOM) past N MiB of
the card, so a big card behaves like the course's 32 GB V100 (benchmarks/gpu_probe_check.py uses it as the
trial launcher). Single-GPU runs only: LLaMA-Factory runs the training in this process.
"""

from __future__ import annotations

import sys


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 3 or args[0] != "--mib":
        print("usage: lf_capped.py --mib N train CONFIG", file=sys.stderr)
        return 2
    mib = float(args[1])
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, mib * 2**20 / total), 0)
    from llamafactory.cli import main as lf_main

    sys.argv = ["llamafactory-cli", *args[2:]]
    lf_main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
