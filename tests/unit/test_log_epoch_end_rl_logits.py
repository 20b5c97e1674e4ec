"""Two readings of the log reader (facts/log_phase.py, log_markers.yaml): a training bar at 100 % is the end of an
epoch or of training, not a long sample (unless a step's frames say otherwise); an RL pass over the logits
(log-probabilities, entropy, a softmax of the logits) is the loss over the vocabulary."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.71 GiB. GPU 0 has a total capacity of "
    "79.19 GiB of which 2.02 GiB is free. Including non-PyTorch memory, this process has 77.16 GiB memory in use. "
    "Of the allocated memory 70.23 GiB is allocated by PyTorch, and 6.12 GiB is reserved by PyTorch but unallocated."
)
EPOCH_DONE = (
    "Train epoch [2/2]: 100%|██████████| 16/16 [01:41<00:00,  6.32s/it, policy_loss=0.021, kl=0.0004]"
)
MIDWAY = "Train epoch [2/2]:  50%|█████     | 8/16 [00:50<00:50,  6.32s/it, policy_loss=0.021, kl=0.0004]"


def test_a_failure_after_a_finished_epoch_bar_is_not_read_as_a_long_sample() -> None:
    f = parse_log_text(EPOCH_DONE + "\n" + OOM + "\n")
    assert f.oom and f.phase == "unknown" and f.good_steps == 16
    assert any("100 %" in e for e in f.phase_evidence)
    # midway through the epoch it is a step that met a longer batch, as before
    assert parse_log_text(MIDWAY + "\n" + OOM + "\n").phase == "long_sample"


def test_a_backward_after_a_finished_epoch_bar_is_the_next_epoch_s_step() -> None:
    log = "\n".join(
        [
            EPOCH_DONE,
            "Traceback (most recent call last):",
            '  File "/opt/openrlhf/trainer/ppo_utils/actor.py", line 210, in training_step',
            "    self.strategy.backward(loss, self.actor, self.actor_optim)",
            OOM,
        ]
    )
    assert parse_log_text(log + "\n").phase == "long_sample"


def test_rl_entropy_over_the_logits_is_the_loss_over_the_vocabulary() -> None:
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/opt/verl/workers/actor/dp_actor.py", line 331, in update_policy',
            "    entropy, log_prob = self._forward_micro_batch(data, temperature=temperature)",
            '  File "/opt/verl/utils/torch_functional.py", line 148, in entropy_from_logits',
            "    pd = torch.nn.functional.softmax(logits, dim=-1)",
            OOM,
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.phase == "first_batch" and "entropy_from_logits" in f.frames
    assert any("log-probabilities or entropy" in e for e in f.phase_evidence)


def test_a_softmax_of_the_logits_on_a_bare_source_line_is_the_loss_not_attention() -> None:
    logits = parse_log_text("    probs = torch.softmax(logits.float(), dim=-1)\n" + OOM + "\n")
    assert logits.phase == "first_batch"
    attention = parse_log_text(
        "    attn_weights = nn.functional.softmax(attn_weights, dim=-1)\n" + OOM + "\n"
    )
    assert attention.phase == "unknown"  # a forward alone does not tell training from evaluation
