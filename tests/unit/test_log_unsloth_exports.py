"""unsloth's exports after training (save_pretrained_merged / save_pretrained_gguf / push_to_hub_*): they merge the
LoRA into 16-bit weights layer by layer on the GPU and print a bare bar over the layers. The export's lines and
frames place the failure at save, and that bar is the export's own progress, not training steps."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# unslothai/unsloth#2193 (tests/cases/real_round7_other.yaml): push_to_hub_gguf on a Colab T4, out of memory while
# merging layer 22 of 40
GGUF_EXPORT = """\
Unsloth: Merging 4bit and LoRA weights to 16bit...
Unsloth: Will use up to 24.38 out of 50.99 RAM for saving.
Unsloth: Saving model... This might take 5 minutes ...
 55%|█████▌    | 22/40 [00:31<00:25,  1.43s/it]
---------------------------------------------------------------------------
OutOfMemoryError                          Traceback (most recent call last)
[<ipython-input-9-ccd214168cfa>](https://localhost:8080/#) in <cell line: 0>()
      1 # Save to multiple GGUF options - much faster if you want multiple!
      2 if True:
----> 3     model.push_to_hub_gguf(
      4         "AlSamCur123/NemoFineTune", # Change hf to your username!
      5         tokenizer,

3 frames
[/usr/local/lib/python3.11/dist-packages/unsloth/save.py](https://localhost:8080/#) in _merge_lora(layer, name)
    175             # W.addmm_(A.t().to(W.dtype), B.t().to(W.dtype), alpha = s)
    176             # if not torch.isfinite(W).all():
--> 177             maximum_element = torch.max(W.min().abs(), W.max())
    178             if not torch.isfinite(maximum_element).item():
    179                 raise ValueError(f"Unsloth: Merge failed.\\n{name} has some elements = infinity.")

OutOfMemoryError: CUDA out of memory. Tried to allocate 280.00 MiB. GPU 0 has a total capacity of 14.74 GiB of which 250.12 MiB is free.
"""
# unslothai/unsloth#1667: save_pretrained_merged, the traceback cut before its error line
MERGED_CUT = """\
Unsloth: Merging weights into 16bit:   0%|                                | 0/2 [01:00<?, ?it/s]Traceback (most recent call last):
  File "/mnt/c/Users/evan/wslfolder/rag/RAG/finetune/finetune.py", line 128, in <module>
    model.save_pretrained_merged("gemma-3",tokenizer)
  File "/home/evan/.conda/envs/finetune/lib/python3.10/site-packages/unsloth/save.py", line 2357, in unsloth_generic_save_pretrained_merged
    unsloth_generic_save(**arguments)
  File "/home/evan/.conda/envs/finetune/lib/python3.10/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context
    return func(*args, **kwargs)
  File "/home/evan/.conda/envs/finetune/lib/python3.10/site-packages/unsloth/save.py", line 2304, in unsloth_generic_save
    merge_and_overwrite_lora(
"""


def test_a_gguf_export_that_runs_out_is_a_save_and_its_bar_is_no_training_step() -> None:
    f = parse_log_text(GGUF_EXPORT)
    assert f.oom and f.phase == "save" and f.phase_confidence == "high"
    assert f.good_steps is None and not f.training_started
    assert any("_merge_lora" in e for e in f.phase_evidence)


def test_the_export_lines_alone_place_a_bare_oom_at_save() -> None:
    lines = GGUF_EXPORT.split("---")[0]  # the export's lines and its bar, then only the error line
    f = parse_log_text(lines + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 280.00 MiB.\n")
    assert f.phase == "save" and f.good_steps is None


def test_a_merged_16bit_save_cut_before_its_error_line_is_placed_at_save() -> None:
    f = parse_log_text(MERGED_CUT)
    assert f.traceback_cut and not f.oom and f.phase == "save"


def test_a_bar_of_the_training_total_after_an_export_is_training_again() -> None:
    # a notebook trains again after an export: its bar counts to the training total seen before
    train = " 25%|██▌       | 10/40 [00:10<00:30,  1.00s/it]\n"
    again = " 50%|█████     | 20/40 [00:20<00:20,  1.00s/it]\n"
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 280.00 MiB.\n"
    f = parse_log_text(train + "Unsloth: Saving model... This might take 5 minutes ...\n" + again + oom)
    assert f.phase == "long_sample" and f.good_steps == 20
