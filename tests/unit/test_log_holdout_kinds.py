"""Kinds of log the held-out real cases (tests/cases/real_holdout.yaml) showed the reader: each test feeds the
shape of a real excerpt (paths shortened) and checks the phase and the facts read from it."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

OOM_NEW = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.15 GiB. GPU 0 has a total capacity of "
    "47.54 GiB of which 188.75 MiB is free. Process 30047 has 47.34 GiB memory in use."
)

# ms-swift prints its training bar with a description ("Train:"); the traceback that follows is cut.
SWIFT_FIRST_STEP = (
    "Train:   0%|          | 0/349 [00:00<?, ?it/s][INFO:swift] use_logits_to_keep: False\n"
    "[rank1]: Traceback (most recent call last):\n"
    '[rank1]:   File "/envs/swift3/site-packages/swift/cli/sft.py", line 7, in <module>\n'
    "[rank1]:     sft_main()\n"
    "[...]\n"
    '[rank0]:   File "/envs/site-packages/transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py", line 491, in forward\n'
    "[rank0]:     attention_mask = self._prepare_attention_mask(hidden_states, cu_seqlens_now)\n"
    f"[rank0]: {OOM_NEW}\n"
)


def test_a_described_training_bar_of_another_trainer_counts_as_the_train_bar() -> None:
    facts = parse_log_text(SWIFT_FIRST_STEP)
    assert facts.oom and facts.phase == "first_batch"
    assert facts.phase_confidence == "high"
    assert facts.good_steps == 0


def test_a_described_training_bar_with_steps_done_is_a_long_sample() -> None:
    text = "Train:  13%|██▋       | 6/45 [01:21<08:46, 13.51s/it]\n" + OOM_NEW + "\n"
    facts = parse_log_text(text)
    assert facts.phase == "long_sample" and facts.good_steps == 6


def test_a_described_evaluation_bar_places_the_failure_in_evaluation() -> None:
    text = (
        "Training Epoch: 1/3, step 20/20 completed (loss: 1.2): 100%|██████████| 20/20 [01:40<00:00, 5.0s/it]\n"
        "evaluating Epoch:  26%|██▌       | 9/34 [00:45<02:05,  5.03s/it]\n" + OOM_NEW + "\n"
    )
    facts = parse_log_text(text)
    assert facts.phase == "eval"


def test_other_described_bars_are_still_data_preparation() -> None:
    text = (
        "Running tokenizer on dataset:  40%|████      | 400/1000 [00:02<00:03, 190.1 examples/s]\n" + OOM_NEW
    )
    facts = parse_log_text(text + "\n")
    assert facts.phase != "long_sample" and facts.good_steps in (None, 0)


# OpenRLHF's PPO bar lost its count in the paste: only the timing tail is glued after the traceback header.
PPO_TAIL = (
    "Traceback (most recent call last):[02:06<01:20, 13.44s/it, pg=-.0119, cri=0.0702, kl=0, glen=1\n"
    '  File "../train_ppo.py", line 164, in train\n'
    "    trainer.fit(prompts_dataloader,\n"
    '  File "/envs/site-packages/openllama2/trainer/ppo_trainer.py", line 209, in training_step\n'
    "    self.strategy.backward(actor_loss, self.actor, self.actor_optim)\n"
    '  File "/envs/site-packages/deepspeed/runtime/engine.py", line 1895, in backward\n'
    "    self.optimizer.backward(loss, retain_graph=retain_graph)\n"
)


def test_a_bar_tail_without_its_count_gives_the_steps_its_time_and_rate_imply() -> None:
    facts = parse_log_text(PPO_TAIL)
    assert facts.traceback_cut and facts.phase == "long_sample"
    assert facts.phase_confidence == "low"  # an estimate, not a count
    assert facts.good_steps == 9  # 126 s at 13.44 s/it
    assert "about 9 steps" in facts.phase_evidence[-1]
    assert "约 9 步" in facts.phase_evidence_text[-1]["zh"]


def test_a_bar_tail_of_less_than_one_iteration_says_nothing() -> None:
    facts = parse_log_text(PPO_TAIL.replace("[02:06<01:20, 13.44s/it", "[00:05<01:20, 13.44s/it"))
    assert facts.phase == "first_batch" and facts.phase_confidence == "low"


def test_a_bar_tail_in_it_per_second_multiplies() -> None:
    facts = parse_log_text(PPO_TAIL.replace("13.44s/it", "2.50it/s"))
    assert facts.good_steps == 315  # 126 s at 2.5 it/s


# llama-recipes (llama-cookbook) runs its own loop: train_utils.train for training, train_utils.evaluation for
# validation.
RECIPES_TRAIN = (
    '  File "/site-packages/llama_recipes/finetuning.py", line 237, in main\n'
    "    results = train(\n"
    '  File "/site-packages/llama_recipes/utils/train_utils.py", line 79, in train\n'
    "    loss = model(**batch).loss\n"
    '  File "/site-packages/transformers/models/llama/modeling_llama.py", line 390, in forward\n'
    "    attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)\n"
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacty of "
    "14.58 GiB of which 635.56 MiB is free. Process 26469 has 13.96 GiB memory in use.\n"
)


def test_the_llama_recipes_training_loop_is_training() -> None:
    facts = parse_log_text(RECIPES_TRAIN)
    assert facts.phase == "first_batch"  # no progress line: the first step, low confidence
    assert facts.phase_confidence == "low"
    assert any("llama-recipes' training loop" in e for e in facts.phase_evidence)


def test_the_llama_recipes_evaluation_loop_is_evaluation() -> None:
    text = RECIPES_TRAIN.replace("line 79, in train", "line 160, in evaluation").replace(
        "results = train(", "eval_ppl, eval_loss = evaluation("
    )
    facts = parse_log_text(text)
    assert facts.phase == "eval" and facts.phase_confidence == "high"
