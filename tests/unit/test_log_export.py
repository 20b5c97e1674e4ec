"""An export's command (LLaMA-Factory's export_model.py / `llamafactory-cli export`, ms-swift's `swift export
--merge_lora true`) makes the run an export (``LogFacts.export``): an OOM while it loads the model is at loading,
one after its shards are all read is the merge-and-write, a save. Excerpts from real public threads."""

from __future__ import annotations

import pytest

from oomdoctor.facts.log import parse_log_text

LF_EXPORT = "\n".join(
    [
        "CUDA_VISIBLE_DEVICES=0 python src/export_model.py     --model_name_or_path /dev_data/pretrained/Qwen-14B-Chat"
        "     --adapter_name_or_path saves/Qwen-14B-Chat/lora/checkpoint-1000     --template qwen"
        "     --finetuning_type lora     --export_dir /dev_data/finetuned_models     --export_size 2",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 268.00 MiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 164.62 MiB is free. Process 95805 has 34.72 GiB memory in use. Including non-PyTorch "
        "memory, this process has 44.25 GiB memory in use. Of the allocated memory 43.82 GiB is allocated by "
        "PyTorch, and 21.69 MiB is reserved by PyTorch but unallocated.",
    ]
)

SWIFT_MERGE = "\n".join(
    [
        "swift export --merge_lora true --ckpt_dir outptus/xxx",
        "[INFO:swift] swift.__version__: 3.5.1",
        "[INFO:swift] model_kwargs: {'device_map': 'cuda:0'}",
        "Loading checkpoint shards: 100%|██████████| 18/18 [00:51<00:00,  2.85s/it]",
        "[INFO:swift] Setting image_factor: 28.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB. GPU 0 has a total capacity of "
        "79.33 GiB of which 81.81 MiB is free.",
    ]
)


def test_an_export_command_then_the_oom_is_the_export_loading_the_model() -> None:
    f = parse_log_text(LF_EXPORT + "\n")
    assert f.export and f.oom
    assert f.phase == "load"


def test_an_export_whose_weights_are_read_fails_in_its_merge_and_write() -> None:
    f = parse_log_text(SWIFT_MERGE + "\n")
    assert f.export and f.oom
    assert f.phase == "save"
    assert any("export" in e for e in f.phase_evidence)


def test_a_training_run_whose_shards_are_read_is_no_export_and_its_phase_is_asked() -> None:
    log = SWIFT_MERGE.replace(
        "swift export --merge_lora true --ckpt_dir outptus/xxx", "swift sft --train_type lora"
    )
    f = parse_log_text(log + "\n")
    assert not f.export and f.oom
    assert f.phase == "unknown"


def test_llamafactory_cli_export_is_an_export() -> None:
    f = parse_log_text("llamafactory-cli export examples/merge_lora/llama3_lora_sft.yaml\n")
    assert f.export and not f.oom


@pytest.mark.parametrize(
    "sentence",
    [
        "I ran swift export and it crashed with an error",
        "after llamafactory-cli export finished I tried again",
        "export_model.py is the script I used",
    ],
)
def test_a_sentence_that_names_an_export_command_is_not_an_export(sentence: str) -> None:
    assert not parse_log_text(sentence + "\n").export
