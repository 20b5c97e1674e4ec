"""A training bar whose count is cut off (only its percentage left) and a bar printed after the error line (a
terminal redraws it as the process exits): both show where training stood when it failed."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# haotian-liu/LLaVA#1152 (LoRA, 10 epochs on a 32 GB card): the old-format message, then the bar at 10 %, cut
OLD_FORMAT = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 284.00 MiB (GPU 0; 31.75 GiB total "
    "capacity; 27.12 GiB already allocated; 99.50 MiB free; 30.44 GiB reserved in total by PyTorch) If reserved "
    "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for "
    "Memory Management and PYTORCH_CUDA_ALLOC_CONF"
)
CUT_BAR_AFTER = OLD_FORMAT + "\n 10%|███████████████████▌\n"


def test_a_cut_bar_printed_after_the_error_places_it_mid_training() -> None:
    f = parse_log_text(CUT_BAR_AFTER)
    assert f.phase == "long_sample" and f.phase_confidence == "low"
    assert f.good_steps is None and f.step is None  # how many steps is not shown
    assert any("10 %" in e for e in f.phase_evidence)
    assert any("after the error line" in e for e in f.phase_evidence)
    assert f.requested_mib == 284.0


def test_a_counted_bar_after_the_error_gives_its_steps() -> None:
    bar = "  3%|▎         | 120/4000 [1:02:11<33:31:09, 31.10s/it]"
    f = parse_log_text(OLD_FORMAT + "\n" + bar + "\n")
    assert (f.phase, f.good_steps, f.step) == ("long_sample", 120, 121)


def test_a_cut_bar_before_the_error_reads_the_same() -> None:
    f = parse_log_text(" 42%|████▏     \n" + OLD_FORMAT + "\n")
    assert f.phase == "long_sample" and f.good_steps is None


def test_a_cut_bar_at_zero_or_at_the_end_tells_no_mid_training_step() -> None:
    at_zero = parse_log_text("  0%|          \n" + OLD_FORMAT + "\n")
    assert at_zero.phase == "first_batch" and at_zero.good_steps == 0
    finished = parse_log_text("100%|██████████\n" + OLD_FORMAT + "\n")
    assert finished.phase == "unknown"  # the end of an epoch or of training: asked


def test_a_bar_after_the_error_does_not_override_what_the_log_showed_before() -> None:
    loading = "Loading checkpoint shards:  50%|█████     | 1/2 [00:10<00:10, 10.0s/it]\n"
    f = parse_log_text(loading + OLD_FORMAT + "\n 10%|█         | 10/100 [00:10<01:30,  1.0it/s]\n")
    assert f.phase == "load"
    before = "  5%|▌         | 50/1000 [05:00<1:35:00,  6.00s/it]\n"
    f = parse_log_text(before + OLD_FORMAT + "\n 10%|█         | 100/1000 [10:00<1:30:00,  6.00s/it]\n")
    assert f.good_steps == 50  # the bar before the failure is what it had done
    assert not any("after the error line" in e for e in f.phase_evidence)


def test_an_evaluation_bar_after_the_error_is_not_training() -> None:
    evaluation = "***** Running Evaluation *****\n"
    f = parse_log_text(evaluation + OLD_FORMAT + "\n 10%|█         | 10/100 [00:10<01:30,  1.0it/s]\n")
    assert f.phase == "eval"
