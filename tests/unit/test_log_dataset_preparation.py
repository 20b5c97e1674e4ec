"""The dataset's preparation as the load phase: its progress bars before training (LLaMA-Factory's "Running
tokenizer on dataset"), the datasets library's map / filter frames (also on a Windows path) and a map worker
that died (host RAM)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# hiyouga/LLaMA-Factory#3586 (Llama-3-8B-1048k): the traceback starts while the tokenizer runs; its error line is
# not in the excerpt
TOKENIZING = """\
Running tokenizer on dataset:   6%|▌         | 4000/68253 [00:04<01:16, 836.54 examples/s]
Running tokenizer on dataset:   7%|▋         | 5000/68253 [00:05<01:15, 833.52 examples/s]Traceback (most recent call last):
  File "/root/autodl-tmp/kdy/LLaMA-Factory/src/train_bash.py", line 14, in <module>
    main()
  File "/root/autodl-tmp/kdy/LLaMA-Factory/src/llmtuner/train/tuner.py", line 33, in run_exp
    run_sft(model_args, data_args, training_args, finetuning_args, generating_args, callbacks)
"""
# unslothai/unsloth-zoo#87 (a notebook on Windows): Dataset.map with num_proc, a worker died
WINDOWS_MAP = """\
File ~\\miniconda3\\envs\\unsloth_exp\\Lib\\site-packages\\datasets\\arrow_dataset.py:3166, in Dataset.map(self, function, with_indices, num_proc, desc)
-> 3166     for rank, done, content in iflatmap_unordered(
   3167         pool, Dataset._map_single, kwargs_iterable=kwargs_per_job
File ~\\miniconda3\\envs\\unsloth_exp\\Lib\\site-packages\\datasets\\utils\\py_utils.py:713, in iflatmap_unordered(pool, func, kwargs_iterable)
--> 713             raise RuntimeError(
"""
MAP_WORKER_DIED = (
    "RuntimeError: One of the subprocesses has abruptly died during map operation.To debug the error, disable "
    "multiprocessing.\n"
)


def test_a_traceback_while_the_tokenizer_runs_is_at_load() -> None:
    f = parse_log_text(TOKENIZING)
    assert f.traceback_cut and f.phase == "load"
    assert any("preprocessed" in e for e in f.phase_evidence)


def test_a_dataset_bar_after_training_started_changes_nothing() -> None:
    bar = " 12%|█▏        | 120/1000 [10:00<1:13:20,  5.00s/it]\n"
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    f = parse_log_text(bar + "Map: 100%|██████████| 50/50 [00:00<00:00, 900.00 examples/s]\n" + oom)
    assert f.phase == "long_sample" and f.good_steps == 120


def test_datasets_map_frames_on_a_windows_path_place_it_at_load() -> None:
    f = parse_log_text(WINDOWS_MAP + MAP_WORKER_DIED)
    assert f.oom and f.ran_out_of == "host" and f.oom_kind == "killed"
    assert f.phase == "load" and "iflatmap_unordered" in f.frames


def test_the_worker_died_message_alone_is_host_memory() -> None:
    f = parse_log_text(MAP_WORKER_DIED)
    assert f.oom and f.ran_out_of == "host"


def test_a_finished_dataset_bar_says_nothing_of_what_ran_next() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    bars = "Map:  40%|████      | 400/1000 [00:01<00:01, 400.00 examples/s]\rMap: 100%|██████████| 1000/1000 [00:02<00:00, 450.00 examples/s]\n"
    assert parse_log_text(bars + oom).phase == "unknown"
    assert parse_log_text(bars.split("\r")[0] + "\n" + oom).phase == "load"


def test_trl_dpo_s_prompt_extraction_is_dataset_preparation() -> None:
    bar = (
        "Extracting prompt in train dataset:  35%|███▌      | 3500/10000 [00:02<00:04, 1500.00 examples/s]\n"
    )
    f = parse_log_text(bar + MAP_WORKER_DIED)
    assert f.phase == "load" and f.ran_out_of == "host"
