"""How many processes a launcher line in a log says it started: the world size from what states it.

A log may carry the command that launched the run (echoed by a script, or repeated in the
``CalledProcessError`` LLaMA-Factory's CLI raises when torchrun fails), the launcher's own report, or an
environment dump. Each of these states the world size; a ``[rankN]`` prefix does not (it is one process's
number). Read line by line by the log scanner; ``rules/assemble.py`` decides among the sources.

    torchrun / python -m torch.distributed.run   --nproc_per_node 8 [--nnodes 2]  (also in list form)
    LLaMA-Factory's own launcher                 NPROC_PER_NODE=8 [NNODES=2] llamafactory-cli train ...
    deepspeed                                    --num_gpus 8 [--num_nodes 2]; its runner's dist_world_size=8
    accelerate launch                            --num_processes 8; "Num processes: 8"
    the environment                              WORLD_SIZE=8, 'WORLD_SIZE': '8'
    a plain report                               world size: 8, world_size=8, DeepSpeed's "world_size ..... 8"
"""

from __future__ import annotations

import re

from oomdoctor.lazyre import lazy

# Cheap test before the patterns below: the line names a launcher count at all.
HINT = lazy(r"nproc|NPROC|num[_-]gpus|num[_-]processes|Num processes|WORLD_SIZE|[Ww]orld[ _][Ss]ize")
# "--x 8", "--x=8", "'--x', '8'", "'X': '8'"; never two unbounded runs of spaces side by side (a hostile line
# of spaces must not make the match quadratic)
_SEP = r"""['"]?(?:\s*[=:,]\s*|\s+)['"]?"""
# Counts are at most nine digits: a hostile 5,000-digit "number" is no count (and never reaches int()).
# (per-node count, node count that multiplies it), most specific first
_PER_NODE: tuple[tuple[re.Pattern[str], re.Pattern[str] | None], ...] = (
    (lazy(rf"--nproc[_-]per[_-]node{_SEP}(\d{{1,9}})\b"), lazy(rf"--nnodes{_SEP}(\d{{1,9}})\b")),
    (lazy(r"\bNPROC_PER_NODE=['\"]?(\d{1,9})\b"), lazy(r"\bNNODES=['\"]?(\d{1,9})\b")),
    (lazy(rf"--num[_-]gpus{_SEP}(\d{{1,9}})\b"), lazy(rf"--num[_-]nodes{_SEP}(\d{{1,9}})\b")),
)
_TOTAL: tuple[re.Pattern[str], ...] = (
    lazy(r"\bdist_world_size=(\d{1,9})\b"),
    lazy(rf"--num[_-]processes{_SEP}(\d{{1,9}})\b"),
    lazy(r"\bNum processes:\s*(\d{1,9})\b"),
    lazy(rf"\bWORLD_SIZE{_SEP}(\d{{1,9}})\b"),
    lazy(r"\bworld[ _]size\s*[:=]\s*(\d{1,9})\b", re.IGNORECASE),
    lazy(r"\bworld_size\s*\.{3,}\s*(\d{1,9})\b"),  # DeepSpeed's config dump: "world_size ...... 8"
)
# An elastic node range (--nnodes 1:2) leaves the count to the rendezvous: no count is stated.
_ELASTIC = lazy(rf"--nnodes{_SEP}\d{{1,9}}:\d{{1,9}}")


def world_size_in(line: str) -> int | None:
    """The number of processes ``line`` says were launched, or None when it states none."""
    if not HINT.search(line) or _ELASTIC.search(line):
        return None
    for per_node, nodes in _PER_NODE:
        m = per_node.search(line)
        if m:
            n = nodes.search(line) if nodes is not None else None
            count = int(m.group(1)) * (int(n.group(1)) if n else 1)
            return count if count > 0 else None
    for total in _TOTAL:
        m = total.search(line)
        if m and int(m.group(1)) > 0:
            return int(m.group(1))
    return None
