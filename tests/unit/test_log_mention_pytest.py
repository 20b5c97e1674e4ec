"""Two shapes of pasted reports (facts/log_scan.py): the reporter's own sentence naming the OOM before the log
(a mention: the message or traceback that follows tells more), and a pytest run whose summary line holds the
message and whose long traceback (``path.py:N: in func``) follows it."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

MESSAGE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.10 GiB. GPU 0 has a total capacity of 21.98 "
    "GiB of which 1.02 GiB is free. Process 4410 has 12.31 GiB memory in use. Process 4417 has 8.61 GiB memory in "
    "use. Of the allocated memory 11.62 GiB is allocated by PyTorch, and 402.11 MiB is reserved by PyTorch but "
    "unallocated."
)


def test_a_sentence_then_the_pytest_summary_line_reads_every_number_of_the_message() -> None:
    log = "\n".join(
        [
            "Nightly job keeps failing with torch.OutOfMemoryError: CUDA out of memory: https://ci.example/run/88",
            "FAILED tests/test_grpo.py::TestGRPO::test_train_peft[tiny-Qwen] - " + MESSAGE,
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.requested_mib == 2150.4 and f.free_mib == 1044.48
    assert [p.pid for p in f.other_processes] == [4410, 4417]
    assert f.allocated_mib == 11898.88


def test_pytest_frames_place_the_training_step() -> None:
    log = "\n".join(
        [
            "FAILED tests/test_grpo.py::TestGRPO::test_train_peft - " + MESSAGE,
            "",
            "Stacktrace:",
            ">       trainer.train()",
            "",
            "tests/test_grpo.py:311: ",
            "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
            ".venv/lib/python3.12/site-packages/transformers/trainer.py:2240: in train",
            "    return inner_training_loop(",
            ".venv/lib/python3.12/site-packages/transformers/trainer.py:2555: in _inner_training_loop",
            "    tr_loss_step = self.training_step(model, inputs, num_items_in_batch)",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.phase == "first_batch"
    assert "_inner_training_loop" in f.frames
    assert any("_inner_training_loop" in e for e in f.phase_evidence)


def test_a_pytest_frame_line_needs_its_in_clause() -> None:
    # "path.py:311: " alone (the test's own line) and prose with ": in " are no frames
    log = "tests/test_grpo.py:311: \nthe run died: in the middle of the night\n" + MESSAGE + "\n"
    assert parse_log_text(log).frames == []


def test_a_mention_gives_way_to_the_traceback_that_follows_it() -> None:
    # the reporter names the OOM first, then pastes the progress and a traceback cut before its error line
    log = "\n".join(
        [
            "After switching to the bigger dataset I met the `CUDA out of memory` problem.",
            "[...]",
            "  2%|▏         | 611/30211 [1:02:10<50:12:01,  6.11s/it]",
            "Traceback (most recent call last):",
            '  File "train.py", line 201, in main',
            "    outputs = model(**batch)",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.phase == "long_sample" and f.good_steps == 611


def test_error_lines_are_no_mentions() -> None:
    # a log record or a pytest failure naming the OOM is the failure itself, whatever follows
    for line in (
        "2024-03-02 10:11:12 ERROR trainer crashed: torch.OutOfMemoryError: CUDA out of memory.",
        "FAILED tests/test_sft.py::test_train - torch.OutOfMemoryError: CUDA out of memory.",
    ):
        tail = "\n".join(
            [
                "  5%|▌         | 50/1000 [01:00<19:00,  1.20s/it]",
                "Traceback (most recent call last):",
                '  File "train.py", line 201, in main',
                "    outputs = model(**batch)",
            ]
        )
        f = parse_log_text(line + "\n" + tail + "\n")
        # the failure is the line itself: the bar after it is read as a bar printed after the error line
        assert f.oom and f.good_steps == 50, line
        assert any("after the error line" in e for e in f.phase_evidence), line
    # the same tail after a sentence: the traceback's state is the failure's
    mention = parse_log_text("We keep getting CUDA out of memory here\n" + tail + "\n")
    assert mention.good_steps == 50
    assert not any("after the error line" in e for e in mention.phase_evidence)


def test_a_chinese_sentence_naming_the_oom_is_a_mention_too() -> None:
    tail = "\n".join(
        [
            " 35%|███▌      | 700/2000 [1:10:00<2:10:00,  6.00s/it]",
            "Traceback (most recent call last):",
            '  File "train.py", line 88, in main',
            "    outputs = model(**batch)",
        ]
    )
    f = parse_log_text("训练到一半就报 CUDA out of memory,日志如下\n" + tail + "\n")
    assert f.oom and f.good_steps == 700 and f.phase == "long_sample"


def test_a_mention_alone_takes_the_state_the_pasted_log_ends_in() -> None:
    log = "\n".join(
        [
            "We keep getting CUDA out of memory around this point, log below",
            "***** Running training *****",
            " 30%|███       | 600/2000 [1:00:00<2:20:00,  6.00s/it]",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.good_steps == 600 and f.phase == "long_sample"
