"""Pasted excerpts cut or broken in the ways real threads show them (facts/log_scan.py, log_phase.py,
log_markers.yaml): the exception header alone on its line, autograd's call wrapped so only its comment is left,
a rank's traceback whose first frame lost its prefix, and "[...]" cuts before a traceback with no error line."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

WORDS = (
    "CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which 18.81 "
    "MiB is free. Including non-PyTorch memory, this process has 79.07 GiB memory in use. Of the allocated memory "
    "77.12 GiB is allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but unallocated."
)


def test_header_alone_on_its_line_keeps_the_traceback_and_the_numbers() -> None:
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1160, in to',
            "    return self._apply(convert)",
            '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1326, in convert',
            "    return t.to(",
            "torch.OutOfMemoryError:",
            WORDS,
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.error_type == "torch.OutOfMemoryError" and f.other_error is None
    assert f.phase == "load"  # Module.to / _apply moving the weights
    assert f.requested_mib == 224.0 and f.free_mib == 18.81 and f.allocated_mib is not None


def test_autograd_comment_left_by_a_wrapped_line_is_the_backward() -> None:
    log = " Calls into the C++ engine to run the backward pass\ntorch.cuda.OutOfMemoryError: " + WORDS + "\n"
    f = parse_log_text(log)
    assert f.oom and f.phase == "first_batch"
    assert "backward" in " ".join(f.phase_evidence)
    # without it, nothing places the failure
    assert parse_log_text("torch.cuda.OutOfMemoryError: " + WORDS + "\n").phase == "unknown"


def test_a_rank_traceback_whose_first_frame_lost_its_prefix_is_that_rank_s() -> None:
    log = "\n".join(
        [
            '  File "/venv/lib/python3.12/site-packages/recipes/full_finetune_distributed.py", line 919, in train',
            "[rank2]:     current_loss = self._loss_step(batch) * current_num_tokens",
            "[rank2]:                    ^^^^^^^^^^^^^^^^^^^^^^",
            '[rank2]:   File "/venv/lib/python3.12/site-packages/recipes/full_finetune_distributed.py", line 800, in',
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.traceback_cut and f.rank == 2
    assert f.phase == "first_batch"  # the recipe's training loop, no step seen
    assert any("torchtune" in e for e in f.phase_evidence)


def test_lines_cut_out_before_a_traceback_without_error_line_leave_the_step_open() -> None:
    frames = [
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.12/site-packages/transformers/trainer.py", line 2555, in _inner_training_loop',
        "    tr_loss_step = self.training_step(model, inputs, num_items_in_batch)",
    ]
    cut = parse_log_text("\n".join(["OOM when the long samples come", "[...]", *frames]) + "\n")
    assert cut.traceback_cut and cut.phase == "unknown"
    assert any("[...]" in e for e in cut.phase_evidence)
    # with no lines cut out, no progress before the traceback is read as the first step (as before)
    whole = parse_log_text("\n".join(frames) + "\n")
    assert whole.phase == "first_batch"
    # and an error line still places it, cut lines or not
    errored = parse_log_text("\n".join(["[...]", *frames, "torch.OutOfMemoryError: " + WORDS]) + "\n")
    assert errored.oom and errored.phase == "first_batch"


def test_a_bar_that_lost_its_bar_keeps_its_count() -> None:
    log = "\n".join(
        [
            "307/46384 [40:22<104:17:25,  8.15s/it]",
            "Traceback (most recent call last):",
            '  File "examples/finetune.py", line 293, in main',
            "    outputs = model(**batch)",
            "torch.OutOfMemoryError: " + WORDS,
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.good_steps == 307 and f.phase == "long_sample" and f.phase_confidence == "high"


def test_a_frame_glued_after_python_s_repeat_note_is_still_a_frame() -> None:
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '[Previous line repeated 2 more times]  File "/usr/lib/python3/site-packages/torch/nn/modules/module.py", '
            "line 927, in _apply",
            "    param_applied = fn(param)",
            "torch.OutOfMemoryError: " + WORDS,
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.frames == ["_apply"] and f.phase == "load"


def test_module_apply_on_bare_source_lines_is_moving_the_weights() -> None:
    log = "    module._apply(fn)\n    param_applied = fn(param)\ntorch.OutOfMemoryError: " + WORDS + "\n"
    assert parse_log_text(log).phase == "load"


def test_a_rank_s_log_line_does_not_claim_an_unprefixed_traceback() -> None:
    log = "\n".join(
        [
            '  File "/venv/lib/python3.12/site-packages/transformers/trainer.py", line 2555, in _inner_training_loop',
            "    tr_loss_step = self.training_step(model, inputs, num_items_in_batch)",
            "[rank1]: [INFO|trainer.py:2414] 2025-01-02 10:00:00,000 >> Saving model checkpoint to out/checkpoint-10",
            "torch.OutOfMemoryError: " + WORDS,
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and "_inner_training_loop" in f.frames and f.rank is None
