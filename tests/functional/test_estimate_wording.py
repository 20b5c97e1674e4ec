"""The Facts tab says what the estimate assumed, and never "fits" next to a run that ran out without
saying why the two differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from functional.tui_helpers import fixed_clock, make_diagnosis, make_facts, screen_text, show_diagnosis
from oomdoctor import records
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.render import facts_rows
from oomdoctor.tui.strings import t


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_fits_next_to_an_oom_says_why_and_the_assumption_is_named(
    user_dir: Path, gpu_source: Any, lang: str, size: tuple[int, int]
) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    facts = make_facts(config, gpu_source)
    facts = records.replace(facts, estimate=records.replace(facts.estimate, fits=True))
    app = build_app(lang=lang, gpu_source=gpu_source, trial_launcher=lambda *a, **k: None, clock=fixed_clock,
                    cwd=user_dir, scan_at_start=False)  # fmt: skip
    async with app.run_test(size=size) as pilot:
        await show_diagnosis(app, pilot, facts, make_diagnosis(), config, user_dir / "qwen3_lora.log")
        await pilot.press("f")
        await pilot.pause()
        text = screen_text(app)
        app.screen.query_one("#facts-view").scroll_end(animate=False)  # at 80x24 the rest is below
        await pilot.pause()
        text = "".join((text + screen_text(app)).split())  # wrapped lines joined, as the user reads them
    assert "".join(t("facts_fits_yet_ran_out", lang).split()) in text
    assert "".join(t("facts_estimate_assumed_measure", lang, cutoff=2048).split()) in text


def test_no_assumption_line_with_measured_lengths(user_dir: Path, gpu_source: Any) -> None:
    facts = make_facts(user_dir / "configs/qwen3_lora.yaml", gpu_source)
    measured = records.replace(facts.estimate, padded_len_source="longest_sample", fits=True)
    rows = dict(facts_rows(records.replace(facts, estimate=measured), make_diagnosis(), "en"))
    assert t("facts_estimate_assumed_label", "en") not in rows
    assert "yet the run ran out" in rows[t("facts_estimate", "en")]  # still an OOM: still says why
    rows = dict(facts_rows(records.replace(facts, estimate=measured), None, "en"))
    assert rows[t("facts_estimate", "en")].endswith("(fits)")  # no OOM on screen: plain "fits"
