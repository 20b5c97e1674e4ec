"""Progress lines and frames of more trainers, and the end-of-training reload: LitGPT's (lit-parrot's) "iter N: loss
..., time: ..." lines are steps done; Megatron-LM's train_step frames are its training step; "Loading best model
from" (load_best_model_at_end) is a load after training, which the steps before it do not contradict."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# Lightning-AI/litgpt#148 (tests/cases/real_round7_other.yaml): adapter v2 runs out after 65498 iterations
LITGPT = """\
iter 65496: loss 1.2029, time: 101.54ms
iter 65497: loss 1.5817, time: 184.24ms
iter 65498: loss 1.4716, time: 101.98ms
Traceback (most recent call last):
  File "/home/ec2-user/SageMaker/lit-parrot/finetune/adapter_v2.py", line 281, in <module>
    CLI(setup)
"""
# NVIDIA/Megatron-LM#818: the first train_step's forward (one of two interleaved tracebacks, cut)
MEGATRON = """\
Traceback (most recent call last):
  File "/workspace/Megatron-LM/pretrain_gpt.py", line 278, in <module>
    pretrain(
  File "/workspace/Megatron-LM/megatron/training/training.py", line 376, in pretrain
    iteration, num_floating_point_operations_so_far = train(
  File "/workspace/Megatron-LM/megatron/training/training.py", line 1432, in train
    train_step(forward_step_func,
  File "/workspace/Megatron-LM/megatron/training/training.py", line 754, in train_step
    losses_reduced = forward_backward_func(
  File "/workspace/Megatron-LM/megatron/core/tensor_parallel/layers.py", line 943, in forward
    output_parallel = self._forward_impl(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB.
"""
MEGATRON_EVAL = MEGATRON.replace(
    '  File "/workspace/Megatron-LM/megatron/training/training.py", line 754, in train_step\n',
    '  File "/workspace/Megatron-LM/megatron/training/training.py", line 1900, in evaluate\n',
)
# hiyouga/LlamaFactory#7944: the reload of the best checkpoint after training
BEST = """\
{'loss': 1.2301, 'grad_norm': 2.1, 'learning_rate': 1e-06, 'epoch': 2.99}
100%|██████████| 400/400 [1:02:11<00:00,  9.33s/it]
Training completed. Do not forget to share your model on huggingface.co/models =)

[INFO|trainer.py:2910] 2025-05-03 09:27:09,456 >> Loading best model from /LLaMA-Factory-main/saves/checkpoint-400 (score: 2.1267566680908203).
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB.
"""


def test_litgpt_iter_lines_are_steps_done() -> None:
    f = parse_log_text(LITGPT)
    assert f.traceback_cut and f.good_steps == 65499 and f.phase == "long_sample"


def test_megatrons_train_step_is_the_training_step_and_its_evaluate_is_eval() -> None:
    f = parse_log_text(MEGATRON)
    assert f.oom and f.phase in ("first_batch", "long_sample", "unknown") and "train_step" in f.frames
    assert any("Megatron-LM's training step" in e for e in f.phase_evidence)
    assert parse_log_text(MEGATRON_EVAL).phase == "eval"


def test_reloading_the_best_model_after_training_is_a_load() -> None:
    f = parse_log_text(BEST)
    assert f.oom and f.phase == "load" and f.phase_confidence == "high"
    assert any("best checkpoint" in e for e in f.phase_evidence)
