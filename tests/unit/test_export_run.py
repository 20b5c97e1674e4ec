"""An export config (``llamafactory-cli export``: export_dir written, no training key) is its own run kind
(derived.run_kind export), and an OOM its log shows is at loading: LLaMA-Factory's export_model reads, merges
and GPTQ-quantizes the weights inside load_model and then only writes shards (rules/derive.py)."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping, exports
from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# LLaMA-Factory#3182: a 4-bit GPTQ export of a 14B model on a 24 GB card, the old-format message.
EXPORT = {
    "model_name_or_path": "/data/Qwen1.5-14B/lora/tran_pre_sft_003",
    "template": "default",
    "export_dir": "/data/Qwen1.5-14B/lora/tran_pre_sft_003-Int4",
    "export_quantization_bit": 4,
    "export_quantization_dataset": "./data/c4_demo.json",
    "export_size": 2,
    "export_legacy_format": False,
}
MESSAGE = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 MiB (GPU 0; 22.19 GiB total "
    "capacity; 21.04 GiB already allocated; 38.50 MiB free; 21.46 GiB reserved in total by PyTorch) If reserved "
    "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.\n"
)


def test_an_export_config_is_its_own_run_kind() -> None:
    assert exports(config_from_mapping(EXPORT))
    # a training config that also names export_dir trains
    assert not exports(config_from_mapping({**EXPORT, "learning_rate": 1e-4}))
    assert not exports(config_from_mapping({**EXPORT, "do_train": True}))
    assert not exports(config_from_mapping({k: v for k, v in EXPORT.items() if k != "export_dir"}))


def test_an_exports_oom_is_at_loading() -> None:
    facts = facts_of(config=config_from_mapping(EXPORT), log=parse_log_text(MESSAGE))
    assert facts.derived.run_kind == "export"
    assert facts.derived.phase == "load" and facts.derived.phase_source == "config"
    assert diagnose(facts).phase == "load"
    # the same message under a config that trains leaves the phase to the log (here: asked)
    trains = facts_of(
        config=config_from_mapping({**EXPORT, "learning_rate": 1e-4}), log=parse_log_text(MESSAGE)
    )
    assert trains.derived.run_kind == "train" and trains.derived.phase != "load"
    # no log: it may not have failed for memory at all, so the phase is not placed
    alone = facts_of(config=config_from_mapping(EXPORT))
    assert alone.derived.phase == "unknown"
