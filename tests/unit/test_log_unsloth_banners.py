"""unsloth's banners: the load banner (its patching line, the card's name and memory) marks the load phase, the
training banner the start of training (a notebook shows no "***** Running training *****")."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

LOAD_BANNER = """\
==((====))==  Unsloth 2024.8: Fast Llama patching. Transformers = 4.44.2.
   \\\\   /|    GPU: Tesla T4. Max memory: 14.748 GB. Platform = Linux.
O^O/ \\_/ \\    Pytorch: 2.4.0+cu121. CUDA = 7.5. CUDA Toolkit = 12.1.
\\        /    Bfloat16 = FALSE. FA [Xformers = 0.0.27.post2. FA2 = False]
 "-____-"     Free Apache license: http://github.com/unslothai/unsloth
"""
# unslothai/unsloth (a Colab T4 at 18k context, tests/cases/real_round4.yaml): the training banner
TRAIN_BANNER = """\
==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1
   \\\\   /|    Num examples = 102 | Num Epochs = 5
O^O/ \\_/ \\    Batch size per device = 2 | Gradient Accumulation steps = 4
\\        /    Total batch size = 8 | Total steps = 60
 "-____-"     Number of trainable parameters = 41,943,040
"""
OOM = (
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 9.47 GiB. GPU 0 has a total capacity of 14.75 GiB "
    "of which 3.78 GiB is free. Process 2116 has 10.95 GiB memory in use.\n"
)
FORWARD = (
    '  File "/usr/local/lib/python3.10/dist-packages/transformers/models/llama/modeling_llama.py", line 602, '
    "in forward\n    hidden_states = self.mlp(hidden_states)\n"
)


def test_an_oom_right_after_the_load_banner_is_at_load() -> None:
    f = parse_log_text(LOAD_BANNER + OOM)
    assert f.phase == "load" and f.card_name == "Tesla T4"


def test_after_the_training_banner_a_forward_is_the_first_step() -> None:
    f = parse_log_text(LOAD_BANNER + TRAIN_BANNER + "Traceback (most recent call last):\n" + FORWARD + OOM)
    assert f.training_started and f.phase == "first_batch" and f.phase_confidence == "high"


def test_the_newer_banner_names_the_card_too() -> None:
    newer = "   \\\\   /|    NVIDIA GeForce RTX 4090. Num GPUs = 1. Max memory: 23.643 GB. Platform: Linux.\n"
    assert parse_log_text(newer + OOM).card_name == "NVIDIA GeForce RTX 4090"
