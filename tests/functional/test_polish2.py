"""Loose ends of the presentation (second pass): one name per estimator term in every view."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Static

from functional.tui_helpers import fixed_clock, screen_text
from oomdoctor import catalogue
from oomdoctor.api import gather
from oomdoctor.cli import main
from oomdoctor.demo import demo_known, demo_paths
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.i18n import msg, pick
from oomdoctor.report.diagnosis import report as diagnosis_report
from oomdoctor.rules.engine import diagnose
from oomdoctor.text import Text
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.render import facts_rows
from oomdoctor.tui.screens import ExplainScreen

LANGS = ("en", "zh")


@pytest.fixture(scope="module")
def demo_facts() -> Any:
    config, log = demo_paths()
    return gather(config, log, **demo_known())


def _demo_app(cwd: Path, lang: str) -> Any:
    return build_app(demo=True, lang=lang, gpu_source=FakeGpuSource(), trial_launcher=lambda *a, **k: None,
                     clock=fixed_clock, cwd=cwd)  # fmt: skip


def _plain(renderable: Any) -> str:
    """A renderable as the text a user reads, however long (the dialog scrolls)."""
    console = Console(width=100, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def _term_name(term: str, lang: str) -> str:
    entry = catalogue.lookup("shared", f"term_{term}")
    assert entry is not None, term
    return entry[lang]


def _finding_text(diagnosis: Any, finding_id: str, lang: str) -> str:
    texts = [Text.of(f.text)[lang] for f in diagnosis.findings if f.id == finding_id]
    assert len(texts) == 1, [f.id for f in diagnosis.findings]
    return texts[0]


@pytest.mark.parametrize("lang", LANGS)
def test_every_term_has_one_name_in_the_table_the_facts_and_the_reports(
    demo_facts: Any, lang: str, capsys: pytest.CaptureFixture[str]
) -> None:
    est = demo_facts.estimate
    assert main(["estimate", "--config", str(demo_paths()[0]), "--gpu", "V100-32GB", "--lang", lang]) == 0
    table = capsys.readouterr().out.splitlines()
    names = {term: _term_name(term, lang) for term in est.terms}
    assert len(set(names.values())) == len(names)  # six terms, six names
    for term, name in names.items():
        # the estimate table: a row that starts with the name
        assert any(line.strip().startswith(name + " ") for line in table), (term, name, table)
        # the same estimate with this term the largest: the finding, the text report and the Facts row
        largest = dataclasses.replace(est, dominant_term=term)
        facts = dataclasses.replace(demo_facts, estimate=largest)
        diagnosis = diagnose(facts)
        assert name in _finding_text(diagnosis, "dominant_term", lang)
        assert name in diagnosis_report(diagnosis, lang)
        rows = dict(facts_rows(facts, diagnosis, lang))
        estimate_row = rows[catalogue.lookup("tui", "facts_estimate")[lang]]  # type: ignore[index]
        assert name in estimate_row, (term, estimate_row)
        others = [other for other in names.values() if other != name and other not in name]
        assert not [other for other in others if other in estimate_row], estimate_row


@pytest.mark.parametrize("lang", LANGS)
async def test_the_app_names_the_largest_term_as_the_table_does(tmp_path: Path, lang: str) -> None:
    app = _demo_app(tmp_path, lang)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("f")
        await pilot.pause()
        term = app.session.facts.estimate.dominant_term
        name = _term_name(term, lang)
        assert name in screen_text(app)  # the Facts tab's estimate row
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExplainScreen)
        body = _plain(app.screen.query_one("#explain-body Static", Static).content)
    assert name in body  # the Explain dialog's "what was noticed"


# --- gradient checkpointing, already on, said once --------------------------------------------------------
GC_WORDS = {"en": "gradient checkpointing", "zh": "梯度检查点"}


def _demo_diagnosis(demo_facts: Any) -> Any:
    diagnosis = diagnose(demo_facts)
    assert diagnosis.proposal is not None and diagnosis.proposal.already_on  # the gc guard held
    return diagnosis


@pytest.mark.parametrize("lang", LANGS)
def test_the_report_names_what_is_already_on_once(demo_facts: Any, lang: str) -> None:
    diagnosis = _demo_diagnosis(demo_facts)
    text = diagnosis_report(diagnosis, lang)
    assert text.lower().count(GC_WORDS[lang]) == 1, text  # in the proposal's "Already on"
    assert pick(diagnosis.proposal.already_on[0], lang) in text
    assert msg("in_fp16", lang) in text  # what no guard says stays in the finding
    assert msg("in_gc_default", lang) not in text


@pytest.mark.parametrize("lang", LANGS)
async def test_explain_names_what_is_already_on_once(tmp_path: Path, lang: str) -> None:
    async with _demo_app(tmp_path, lang).run_test(size=(120, 40)) as pilot:
        app = pilot.app
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExplainScreen)
        body = _plain(app.screen.query_one("#explain-body Static", Static).content)
        already_on = pick(app.session.current_proposal.already_on[0], lang)
    assert body.lower().count(GC_WORDS[lang]) == 1, body
    assert " ".join(already_on.split()) in " ".join(body.split())  # said with the change
    assert msg("in_fp16", lang) in body
