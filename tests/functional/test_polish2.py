"""Loose ends of the presentation (second pass): one name per estimator term in every view."""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.app import App, ComposeResult
from textual.widgets import Static

import oomdoctor.tui as tui_package
from functional.tui_helpers import ScriptedTrial, apply_first_proposal, fixed_clock, screen_text
from oomdoctor import catalogue, records
from oomdoctor.api import gather
from oomdoctor.cli import main
from oomdoctor.demo import demo_known, demo_paths
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.i18n import msg, pick
from oomdoctor.report import units
from oomdoctor.report.diagnosis import report as diagnosis_report
from oomdoctor.rules.engine import diagnose
from oomdoctor.text import Text
from oomdoctor.tui.bindings import localized, words_of
from oomdoctor.tui.charts import USAGE_MIN_ROWS, UsageChart, power_scale_top
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.render import facts_rows
from oomdoctor.tui.screens import ExplainScreen
from oomdoctor.tui.strings import t
from oomdoctor.tui.trial_screen import TrialScreen

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
    entry = catalogue.lookup(catalogue.SHARED, f"term_{term}")
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
        largest = records.replace(est, dominant_term=term)
        facts = records.replace(demo_facts, estimate=largest)
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


# --- utilisation and power as a chart ---------------------------------------------------------------------
async def _running_trial(
    app: Any, pilot: Any, launcher: ScriptedTrial, user_dir: Path, gpu_source: Any
) -> Any:
    await apply_first_proposal(app, pilot, user_dir, gpu_source)
    await pilot.press("t", "enter")
    assert launcher.started.wait(10)
    await pilot.pause()
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, TrialScreen)
    return screen


def _column(text: str, region: Any) -> str:
    """The lines of ``region`` in a screen's text (what lies left of the usage chart, the memory chart, is one
    cell a character)."""
    lines = text.splitlines()[region.y : region.y + region.height]
    return "\n".join(line[region.x : region.x + region.width] for line in lines)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize("lang", LANGS)
async def test_utilisation_and_power_are_charted_beside_the_memory(
    user_dir: Path, gpu_source: Any, lang: str, size: tuple[int, int]
) -> None:
    launcher = ScriptedTrial(outcome="ok", wait_for_stop=True, hold_s=5.0)
    app = build_app(lang=lang, gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock,
                    cwd=user_dir, scan_at_start=False)  # fmt: skip
    async with app.run_test(size=size) as pilot:
        screen = await _running_trial(app, pilot, launcher, user_dir, gpu_source)
        chart = screen.query_one("#trial-usage", UsageChart)
        side = screen.query_one("#trial-side").region
        running = (chart.drawn, chart.region, _column(screen_text(app), chart.region))
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        done = (chart.drawn, screen_text(app))
    drawn, region, plot = running
    # live: both series under their figures, each with its scale, inside the 30-cell column
    assert drawn and region.height >= USAGE_MIN_ROWS and side.contains_region(region)
    powers = [60.0 + 40 * i for i in range(5)]  # what ScriptedTrial samples
    top = power_scale_top(max(powers))
    for tick in (units.percent(100), units.percent(0), units.watts(top), units.watts(0)):
        assert tick in plot, (tick, plot)
    assert any(ch in plot for ch in "⠁⠂⠄⡀⠈⠐⠠⢀")  # the lines themselves (braille)
    # ended: the charts shrink above the result; the column keeps the figures, the chart needs more rows
    drawn_done, text_done = done
    assert not drawn_done
    for key, figure in (("trial_util", units.percent(80)), ("trial_power", units.watts(220))):
        assert t(key, lang, **{key.removeprefix("trial_"): figure}) in text_done


# --- the keys' words come from the catalogue alone --------------------------------------------------------
TUI = Path(tui_package.__file__).parent


def _screens_with_bindings() -> list[type]:
    import importlib
    import inspect

    owners: list[type] = []
    for module_file in sorted(TUI.glob("*.py")):
        module = importlib.import_module(f"oomdoctor.tui.{module_file.stem}")
        owners += [
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and "BINDINGS" in vars(cls)
        ]
    return owners


def test_no_binding_is_made_with_words_of_its_own() -> None:
    makers = [
        f"{path.name}:{node.lineno}"
        for path in sorted(TUI.glob("*.py"))
        if path.name != "bindings.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Binding"
    ]
    assert makers == []  # every binding is bindings.bind(keys, action, id=...)


@pytest.mark.parametrize("lang", LANGS)
def test_every_key_reads_its_words_from_the_catalogue(lang: str) -> None:
    owners = _screens_with_bindings()
    assert {"OomDoctorApp", "MainScreen", "TrialScreen", "WatchScreen", "DoctorModal"} <= {
        o.__name__ for o in owners
    }
    for owner in owners:
        for binding in owner.BINDINGS:
            assert binding.id, (owner.__name__, binding.key)
            words = words_of(binding.id)
            assert (binding.description, binding.tooltip) == (
                t(f"key_{words}", "en"),
                t(f"key_{words}_tip", "en"),
            )
            shown = localized(binding, lang)
            assert (shown.description, shown.tooltip) == (
                t(f"key_{words}", lang),
                t(f"key_{words}_tip", lang),
            )


# --- small ones -------------------------------------------------------------------------------------------
_KEY_IN_TEXT = re.compile(r"\b(msg|both|t)\(\"([a-z0-9_]+)\"")


def test_a_key_a_docstring_names_exists() -> None:
    """A docstring's example (``BadInput(msg("file_missing", ...))``) names a key the catalogue has."""
    named = []
    for path in sorted((TUI.parent).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node) or ""
                named += [(path.name, call, key) for call, key in _KEY_IN_TEXT.findall(doc)]
    assert named  # errors.BadInput's docstring shows how a message is made
    missing = [n for n in named if catalogue.lookup("tui" if n[1] == "t" else "core", n[2]) is None]
    assert missing == []


@pytest.mark.parametrize("lang", LANGS)
def test_the_fields_of_a_text_are_the_same_in_either_language(lang: str) -> None:
    entry = catalogue.lookup("core", "file_missing")
    assert entry is not None
    assert catalogue.fields(entry[lang]) == {"what", "path"}


class _UsageApp(App[None]):
    CSS = "UsageChart { height: 8; width: 30; }"

    def compose(self) -> ComposeResult:
        yield UsageChart()


async def test_the_usage_chart_draws_the_series_it_has_each_with_its_scale() -> None:
    async with _UsageApp().run_test(size=(40, 10)) as pilot:
        chart = pilot.app.query_one(UsageChart)
        chart.set_data(([], []), ([], []), right_s=1.0)  # no GPU: the host's memory alone, no usage
        await pilot.pause()
        assert not chart.drawn and not _plain(chart.render()).strip()
        chart.set_data(([0.0, 0.5, 1.0], [10.0, 60.0, 90.0]), ([], []), right_s=1.0)  # no power reading
        await pilot.pause()
        util_only = _plain(chart.render())
        chart.set_data(([], []), ([0.0, 0.5, 1.0], [60.0, 240.0, 260.0]), right_s=1.0)
        await pilot.pause()
        power_only = _plain(chart.render())
        assert chart.drawn
    assert units.percent(100) in util_only and " W" not in util_only
    assert units.watts(power_scale_top(260.0)) in power_only and "%" not in power_only
    assert power_scale_top(260.0) == 300.0 and power_scale_top(42.0) == 50.0 and power_scale_top(0.0) == 10.0
