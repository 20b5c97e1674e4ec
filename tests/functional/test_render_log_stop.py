"""The TUI's one-line summary of a log with no error line says so (as the report's first line does), not
"No OOM in the log": a run whose log stops inside the training bar, a traceback cut before its error line."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.log import parse_log_text
from oomdoctor.i18n import msg
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose
from oomdoctor.tui import render
from oomdoctor.tui.strings import t

BANNER = (
    "[INFO|trainer.py:2414] 2025-06-02 10:11:20,001 >> ***** Running training *****\n"
    "[INFO|trainer.py:2419] 2025-06-02 10:11:20,001 >>   Total optimization steps = 1,200\n"
)
BAR = "".join(
    f" {n * 100 // 1200:2d}%|#         | {n}/1200 [20:{n % 60:02d}<1:40:00, 5.02s/it]\n" for n in (61, 62, 63)
)
CUT = (
    "Traceback (most recent call last):\n"
    '  File "/opt/LLaMA-Factory/src/llamafactory/launcher.py", line 23, in <module>\n'
    "    launch()\n"
    '  File "/opt/LLaMA-Factory/src/llamafactory/train/tuner.py", line 93, in run_exp\n'
    '    _training_function(config={"args": args, "callbacks": callbacks})\n'
)


def _summary(text: str, lang: str) -> str:
    config = config_from_mapping({"stage": "sft", "do_train": True, "per_device_train_batch_size": 2})
    facts = facts_of(config=config, log=parse_log_text(text))
    return render.oom_summary(diagnose(facts), facts, lang)  # type: ignore[arg-type]


def test_a_log_that_stops_in_the_bar_says_it_stops_in_both_languages() -> None:
    for lang in ("en", "zh"):
        line = _summary(BANNER + BAR, lang)
        assert line == msg("r_log_stops", lang) and line != t("oom_none", lang)


def test_a_cut_traceback_whose_frames_place_nothing_says_there_is_no_error_line() -> None:
    assert _summary(CUT, "en") == msg("r_no_error_line", "en")


def test_a_finished_run_is_still_no_oom() -> None:
    done = "{'train_runtime': 6020.1, 'train_samples_per_second': 3.2, 'train_steps_per_second': 0.2, 'epoch': 3.0}\n"
    assert _summary(BANNER + BAR + done, "en") == t("oom_none", "en")
