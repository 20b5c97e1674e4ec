"""The card size question on the diagnosis screen: all nine sizes shown as numbered answers, and the number
keys 1-9 choose them (the ninth, 141 GB, with key 9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from functional.tui_helpers import fixed_clock, make_diagnosis, make_facts, screen_text, show_diagnosis
from oomdoctor.rules.questions import builtin_question
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.widgets import QuestionPanel


async def test_all_nine_card_sizes_show_and_key_nine_chooses_the_last(
    user_dir: Path, gpu_source: Any
) -> None:
    from oomdoctor import records

    config = user_dir / "configs/qwen3_lora.yaml"
    facts = make_facts(config, gpu_source, phase="unknown")
    diagnosis = records.replace(
        make_diagnosis(questions=True), questions=[builtin_question("card_gb", "engine")]
    )
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=lambda *a, **k: None, clock=fixed_clock,
                    cwd=user_dir, scan_at_start=False)  # fmt: skip
    messages: list[Any] = []
    async with app.run_test(size=(120, 50), message_hook=messages.append) as pilot:
        await show_diagnosis(app, pilot, facts, diagnosis, config, user_dir / "qwen3_lora.log")
        text = screen_text(app)
        assert "How much memory does the training GPU have" in text
        for number, size in enumerate(("8 GB", "11-12 GB", "16 GB", "24 GB", "32 GB", "40 GB", "48 GB"), 1):
            assert f"{number} {size}" in text
        assert "8 80 GB (A100/A800/H100/H800 80G)" in text and "9 141 GB or more (H200, B200)" in text
        await pilot.press("9")
        await app.workers.wait_for_complete()
        await pilot.pause()
        answered = list({id(m): m for m in messages if isinstance(m, QuestionPanel.Answered)}.values())
        assert [(m.key, m.value) for m in answered] == [("card_gb", "141")]
        assert app.session.facts.answers == {"card_gb": "141"}
