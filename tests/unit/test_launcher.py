"""World size from the launcher lines a log carries (facts/launcher.py), never from a rank's number."""

from __future__ import annotations

import pytest

from oomdoctor.facts.launcher import world_size_in

# LLaMA-Factory#7781: the CLI's CalledProcessError repeats the torchrun command in list form.
LF_7781 = (
    "subprocess.CalledProcessError: Command '['torchrun', '--nnodes', '1', '--node_rank', '0', "
    "'--nproc_per_node', '8', '--master_addr', '127.0.0.1', '--master_port', '40435', "
    "'/root/filesystem/LOCAL/LLaMA-Factory/src/llamafactory/launcher.py', 'saves/predict.yaml']' "
    "returned non-zero exit status 1."
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (LF_7781, 8),
        ("FORCE_TORCHRUN=1 NNODES=2 NODE_RANK=0 NPROC_PER_NODE=8 llamafactory-cli train examples/x.yaml", 16),
        ("torchrun --nnodes=2 --nproc_per_node=4 src/train.py --deepspeed ds_z3_config.json", 8),
        ("deepspeed --num_gpus 8 src/train.py --deepspeed ds_config.json", 8),
        ("[2024-05-07 10:01:12,345] [INFO] [launch.py:163:main] dist_world_size=4", 4),
        ("accelerate launch --num_processes 2 --config_file fsdp.yaml train.py", 2),
        ("Num processes: 2", 2),
        ("export WORLD_SIZE=16", 16),
        ("[INFO|parser.py:355] Process rank: 3, world size: 8, device: cuda:3, n_gpu: 1", 8),
        ("environ({'WORLD_SIZE': '8', 'RANK': '0', 'LOCAL_RANK': '0'})", 8),
        ("Discovered MPI settings of world_rank=0, local_rank=0, world_size=16, master_addr=10.0.0.1", 16),
        ("[INFO] [config.py:1004:print]   world_size ................... 4", 4),
        ("python -m torch.distributed.launch --nproc_per_node=2 train.py", 2),
        ("torchrun --nproc_per_node=auto train.py", None),  # a count only the machine knows
        ("torchrun --nnodes 1:2 --nproc_per_node 4 train.py", None),  # elastic: the rendezvous decides
        ("[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB. GPU 3", None),
        ("{'loss': 0.717, 'grad_norm': 0.749, 'epoch': 1.38}", None),
    ],
)
def test_world_size_in_a_launcher_line(line: str, expected: int | None) -> None:
    assert world_size_in(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("--nproc_per_node" + " " * 16_000 + "x", None),  # a whitespace run with nothing after it
        ("--nproc_per_node" + " " * 16_000 + "4", 4),
        ("WORLD_SIZE=" + "9" * 5_000, None),  # not a count: more digits than any world size
        ("torchrun --nproc_per_node " + "8" * 12 + " train.py", None),
    ],
    ids=["spaces-then-text", "spaces-then-count", "5000-digits", "12-digits"],
)
def test_hostile_lines_state_no_count_and_stay_cheap(line: str, expected: int | None) -> None:
    assert world_size_in(line) == expected
