"""A traceback cut inside DeepSpeed's engine __init__ (musubi-tuner through accelerate's prepare, a real public
thread): the running line ``self._configure_distributed_model(model)`` is the model being moved onto the card, the
weights at loading, not the ZeRO optimizer's partitions that the __init__ frame alone stands for."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

ROOT = "/media/nvme/anaconda3/envs/wyon10/lib/python3.10/site-packages"
HEAD = [
    "[rank6]: Traceback (most recent call last):",
    '[rank6]:   File "/media/nvme/wyon/musubi-tuner/src/musubi_tuner/hv_train_network.py", line 1882, in train',
    "[rank6]:     transformer = accelerator.prepare(transformer)",
    f'[rank6]:   File "{ROOT}/accelerate/accelerator.py", line 1440, in prepare',
    "[rank6]:     result = self._prepare_deepspeed(*args)",
    f'[rank6]:   File "{ROOT}/accelerate/accelerator.py", line 2033, in _prepare_deepspeed',
    "[rank6]:     engine, optimizer, _, lr_scheduler = ds_initialize(**kwargs)",
    f'[rank6]:   File "{ROOT}/deepspeed/__init__.py", line 203, in initialize',
    "[rank6]:     engine = DeepSpeedEngine(args=args,",
    f'[rank6]:   File "{ROOT}/deepspeed/runtime/engine.py", line 291, in __init__',
]


def test_the_engine_placing_the_model_is_the_weights_at_loading() -> None:
    f = parse_log_text("\n".join([*HEAD, "[rank6]:     self._configure_distributed_model(model)"]) + "\n")
    assert f.traceback_cut and f.phase == "load"
    assert f.setup_step is None


def test_the_engine_building_its_optimizer_stays_the_optimizers_set_up() -> None:
    f = parse_log_text(
        "\n".join([*HEAD, "[rank6]:     self._configure_optimizer(optimizer, model_parameters)"]) + "\n"
    )
    assert f.traceback_cut and f.phase == "load"
    assert f.setup_step == "optimizer_init"
