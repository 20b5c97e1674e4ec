"""Set-up before any step is the load phase, not an optimizer step (issue 8 item 4): DDP's Reducer when the model is
wrapped, accelerate's prepare, DeepSpeed's initialise building the ZeRO optimizer's partitions. ``setup_step`` says
what the set-up was allocating (the cause is for the rules)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# deepspeedai/DeepSpeed#4715 (tests/cases/real_round7_other.yaml): accelerate's prepare wraps the model in DDP
DDP_PREPARE = """\
    return self.prepare_model(obj, device_placement=device_placement)
  File "/usr/local/lib/python3.10/dist-packages/accelerate/accelerator.py", line 1433, in prepare_model
    model = torch.nn.parallel.DistributedDataParallel(
  File "/usr/local/lib/python3.10/dist-packages/torch/nn/parallel/distributed.py", line 811, in __init__
    self._ddp_init_helper(
  File "/usr/local/lib/python3.10/dist-packages/torch/nn/parallel/distributed.py", line 1100, in _ddp_init_helper
    self.reducer = dist.Reducer(
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 25.10 GiB. GPU 1 has a total capacty of 39.39 GiB of which 13.57 GiB is free. Including non-PyTorch memory, this process has 25.81 GiB memory in use. Of the allocated memory 25.23 GiB is allocated by PyTorch, and 12.97 MiB is reserved by PyTorch but unallocated.
"""
# shibing624/MedicalGPT#317: the message first, then the traceback, cut in accelerate's prepare, then torchrun's
PREPARE_AFTER_MESSAGE = """\
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 280.00 MiB. GPU 1 has a total capacty of 79.33 GiB of which 190.44 MiB is free. Process 2993049 has 3.16 GiB memory in use. Including non-PyTorch memory, this process has 75.97 GiB memory in use. Of the allocated memory 74.93 GiB is allocated by PyTorch, and 48.07 MiB is reserved by PyTorch but unallocated.
Traceback (most recent call last):
  File "pretraining.py", line 728, in main
    train_result = trainer.train(resume_from_checkpoint=checkpoint)
  File "/envs/cpt/lib/python3.8/site-packages/transformers/trainer.py", line 1672, in _inner_training_loop
    model, self.optimizer = self.accelerator.prepare(self.model, self.optimizer)
  File "/envs/cpt/lib/python3.8/site-packages/accelerate/accelerator.py", line 1227, in prepare
    result = tuple(
[...]
  File "/envs/cpt/lib/python3.8/site-packages/torch/distributed/launcher/api.py", line 264, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
"""
ZERO_BANNER = "[2024-08-30 17:45:02,901] [INFO] [logging.py:96:log_dist] [Rank 0] Creating BF16 ZeRO stage 2 optimizer\n"
BARE_OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.01 GiB.\n"
ADAM_STEP = """\
Traceback (most recent call last):
  File "/site-packages/transformers/trainer.py", line 2003, in _inner_training_loop
    self.optimizer.step()
  File "/site-packages/torch/optim/adamw.py", line 184, in step
    adamw(
  File "/site-packages/torch/optim/adamw.py", line 335, in adamw
    func(
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.
"""


def test_ddp_wrapping_the_model_is_set_up() -> None:
    f = parse_log_text(DDP_PREPARE)
    assert f.phase == "load" and f.setup_step == "ddp_buckets" and f.phase_confidence == "high"


def test_accelerates_prepare_after_the_message_is_set_up() -> None:
    f = parse_log_text(PREPARE_AFTER_MESSAGE)
    assert f.oom and f.phase == "load" and "prepare" in f.frames and f.setup_step is None


def test_deepspeed_building_its_zero_optimizer_is_set_up() -> None:
    f = parse_log_text(ZERO_BANNER + BARE_OOM)
    assert f.phase == "load" and f.setup_step == "optimizer_init"


def test_the_optimizer_update_itself_stays_an_optimizer_step() -> None:
    f = parse_log_text(ADAM_STEP)
    assert f.phase == "optimizer_step" and f.setup_step is None
