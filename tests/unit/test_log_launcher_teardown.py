"""DeepSpeed's launcher tearing the run down (its sigkill_handler line): after a traceback cut by the excerpt, that
traceback is the failure (cut, asked where it was), not host RAM; a child that exited with a positive code raised
an exception the log does not show (asked); -9 is still the kernel's OOM killer."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# OpenRLHF/OpenRLHF#519 (tests/cases/real_round7_other.yaml): PPO on 8 x H100, rank 0's traceback cut by the reporter
CUT_THEN_TEARDOWN = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/export/home/OpenRLHF/openrlhf/cli/train_ppo.py", line 268, in train
[rank0]:     trainer.fit(args, prompts_dataloader, pretrain_dataloader, consumed_samples, num_update_steps_per_episodes)
[rank0]:   File "/export/home/OpenRLHF/openrlhf/trainer/ppo_trainer.py", line 240, in fit
[rank0]:     status = self.ppo_train(steps)
[rank0]:   File "/export/home/OpenRLHF/openrlhf/trainer/ppo_trainer.py", line 282, in ppo_train
[rank0]:     status = self.training_step(experience, global_steps)
[...]
[2024-11-13 19:22:21,564] [ERROR] [launch.py:325:sigkill_handler] ['/envs/bin/python', '-u', '-m', 'openrlhf.cli.train_ppo', '--local_rank=7', '--zero_stage', '2'] exits with return code = 1
"""
# hiyouga/LlamaFactory#2444 (tests/cases/real_round6_lf.yaml): the launcher's line alone, an exception exit
CODE_ONE = "[ERROR] [launch.py:321:sigkill_handler] ['/py38/bin/python', '-u', 'src/train_bash.py', '--stage', 'ppo'] exits with return code = 1\n"
CODE_KILL = "[2024-11-19 14:29:58,770] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python3', '-u', 'src/train.py'] exits with return code = -9\n"


def test_a_cut_traceback_before_the_teardown_is_the_failure_not_host_ram() -> None:
    f = parse_log_text(CUT_THEN_TEARDOWN)
    assert f.traceback_cut and not f.oom and f.ran_out_of is None and f.rank == 0
    assert "ppo_train" in f.frames
    assert any(q.key == "memory_kind" for q in diagnose(facts_of(log=f)).questions)


def test_an_exception_exit_alone_is_asked_not_said() -> None:
    f = parse_log_text(CODE_ONE)
    assert not f.oom and f.ran_out_of is None and f.launched
    d = diagnose(facts_of(log=f))
    assert d.cause != "host_ram" and any(q.key == "memory_kind" for q in d.questions)


def test_a_sigkill_exit_is_still_the_oom_killer() -> None:
    f = parse_log_text(CODE_KILL)
    assert f.oom and f.ran_out_of == "host" and f.oom_kind == "killed"
