"""torchrun's ChildFailedError (a launcher saying a child failed) under a child traceback cut before its error line:
the child's traceback is the failure, cut (asked, placed where it was), never a plain "no OOM"
(facts/log_child.py)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# hiyouga/LlamaFactory#6040 (tests/cases/real_round7_lf.yaml): the prediction after training, cut by the reporter
CHILD = """\
Traceback (most recent call last):
  File "/work/LLaMA-Factory-main/src/llamafactory/launcher.py", line 23, in <module>
    launch()
  File "/work/LLaMA-Factory-main/src/llamafactory/launcher.py", line 19, in launch
    run_exp()
  File "/work/LLaMA-Factory/src/llamafactory/train/tuner.py", line 50, in run_exp
    run_sft(model_args, data_args, training_args, finetuning_args, generating_args, callbacks)
  File "/work/LLaMA-Factory/src/llamafactory/train/sft/workflow.py", line 117, in run_sft
    predict_results = trainer.predict(dataset_module["eval_dataset"], metric_key_prefix="predict", **gen_kwargs)
  File "/envs/llmfactory/lib/python3.11/site-packages/transformers/trainer_seq2seq.py", line 244, in predict
    return super().predict(test_dataset, ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix)
[...]
"""
LAUNCHER_FRAMES = """\
  File "/envs/llmfactory/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 134, in __call__
    return launch_agent(self._config, self._entrypoint, list(args))
  File "/envs/llmfactory/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 250, in launch_agent
    raise ChildFailedError(
"""
SUMMARY = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
/work/LLaMA-Factory-main/src/llamafactory/launcher.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 18572)
============================================================
"""


def test_a_cut_child_traceback_under_childfailederror_is_asked_where_it_was() -> None:
    f = parse_log_text(CHILD + LAUNCHER_FRAMES + SUMMARY)
    assert f.traceback_cut and not f.oom and f.other_error is None
    assert f.phase == "eval" and "predict" in f.frames
    diagnosis = diagnose(facts_of(log=f))
    assert any(q.key == "memory_kind" for q in diagnosis.questions)


def test_the_launchers_own_traceback_after_the_childs_is_read_the_same() -> None:
    launcher_tb = "Traceback (most recent call last):\n" + LAUNCHER_FRAMES
    f = parse_log_text(CHILD + launcher_tb + SUMMARY)
    assert f.traceback_cut and f.phase == "eval" and f.other_error is None


def test_a_child_that_printed_its_own_error_keeps_it() -> None:
    nccl = "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited\n"
    f = parse_log_text(
        CHILD.replace("[...]\n", "")
        + nccl
        + "Traceback (most recent call last):\n"
        + LAUNCHER_FRAMES
        + SUMMARY
    )
    assert not f.oom and not f.traceback_cut and f.other_error is not None and "NCCL" in f.other_error


def test_childfailederror_alone_is_still_the_launchers_error() -> None:
    f = parse_log_text("Traceback (most recent call last):\n" + LAUNCHER_FRAMES + SUMMARY)
    assert not f.oom and not f.traceback_cut and f.other_error is not None
