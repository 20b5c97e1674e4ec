"""Key m and Apply on "measure the real lengths": tokenize the dataset in a worker, show progress, then
diagnose again on the real lengths. The real path runs LLaMA-Factory on the tiny Qwen3 fixture; the
cancel and error paths need neither LLaMA-Factory nor a tokenizer."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from functional.tui_helpers import fixed_clock, screen_text, settle
from oomdoctor.facts.types import DataFacts
from oomdoctor.resources import configs_dir
from oomdoctor.tui.app import OomDoctorApp
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import ErrorScreen, MainScreen
from oomdoctor.tui.session import MEASURE_LENGTHS_RULE

HAS_LLAMAFACTORY = importlib.util.find_spec("llamafactory") is not None
CUTOFF_LEN = 96  # the tiny samples are ~60-105 tokens: some are cut at this cutoff


def _long_sample_run(folder: Path, model_dir: Path, data_dir: Path) -> tuple[Path, Path]:
    """A config for the tiny model and the demo's log of an OOM at a long sample mid-training."""
    from fixtures.tiny_qwen3 import tiny_train_config

    raw = tiny_train_config(model_dir, data_dir, folder / "out", cutoff_len=CUTOFF_LEN)
    raw.update(per_device_train_batch_size=4, gradient_accumulation_steps=8)
    config = folder / "train.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    log = folder / "train.log"
    log.write_bytes((configs_dir() / "demo" / "train.log").read_bytes())
    return config, log


def _direct_counts(model_dir: Path, data_dir: Path, name: str) -> list[int]:
    """Each alpaca sample formatted as ``qwen3_nothink`` formats it, counted with the tiny tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    counts = []
    for row in json.loads((data_dir / f"{name}.json").read_text(encoding="utf-8")):
        prompt = row["instruction"] + ("\n" + row["input"] if row["input"] else "")
        text = f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n{row['output']}<|im_end|>\n"
        counts.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return counts


def _app(config: Path, log: Path, cwd: Path, gpu_source: Any, lang: str = "en") -> OomDoctorApp:
    return build_app(config, log, lang, gpu_source, lambda *a, **k: None, fixed_clock, cwd=cwd)


async def _show_proposal(app: OomDoctorApp, pilot: Any, rule: str) -> None:
    """Press n until ``rule`` is the proposal on screen."""
    for _ in range(len(app.session.proposals)):
        current = app.session.current_proposal
        if current is not None and current.rule == rule:
            return
        await pilot.press("n")
        await pilot.pause()
    raise AssertionError(f"{rule} not among {[p.rule for p in app.session.proposals]}")


async def _wait_measured(app: OomDoctorApp, pilot: Any, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while app.session.measuring and time.monotonic() < deadline:
        await pilot.pause(0.1)
    await settle(app, pilot)


@pytest.mark.skipif(not HAS_LLAMAFACTORY, reason="measuring lengths needs LLaMA-Factory (the train extra)")
async def test_apply_on_measure_proposal_measures_real_lengths(
    tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path, gpu_source: Any
) -> None:
    config, log = _long_sample_run(tmp_path, tiny_qwen3_dir, tiny_dataset_dir)
    app = _app(config, log, tmp_path, gpu_source)
    messages: list[Any] = []
    async with app.run_test(size=(100, 30), message_hook=messages.append) as pilot:
        await settle(app, pilot)
        session = app.session
        assert session.facts is not None and session.facts.data is None
        before = session.facts.estimate
        await _show_proposal(app, pilot, MEASURE_LENGTHS_RULE)
        assert "Press a (or m anywhere) to measure them now" in screen_text(app)
        assert app.screen.check_action("apply", ()) is True  # manual advice, yet Apply does something here
        await pilot.press("a")
        await _wait_measured(app, pilot)
        assert not session.measuring
        # measuring writes no change folder: only the lengths, kept for the next session in trials/
        assert [p.name for p in tmp_path.glob("trials/*")] in ([], ["lengths.json"])
        data = session.facts.data
        train = _direct_counts(tiny_qwen3_dir, tiny_dataset_dir, "tiny_train")
        assert data is not None and data.source == "tokenized"
        assert data.max_tokens == max(train) and data.samples == len(train)
        assert data.truncated == sum(1 for n in train if n > CUTOFF_LEN)
        assert data.eval_max_tokens == max(_direct_counts(tiny_qwen3_dir, tiny_dataset_dir, "tiny_val"))
        # The estimate is rebuilt on the real lengths (the card stays the one the facts named).
        est = session.facts.estimate
        assert est is not None and before is not None and est is not before
        assert est.gpu_total_mib == session.facts.capacity_mib
        # Diagnosed again: the engine saw the lengths, so "measure them" is no longer proposed.
        assert session.diagnosis is not None
        assert MEASURE_LENGTHS_RULE not in [p.rule for p in session.proposals]
        assert session.diagnosis.facts["derived"].get("padded_longest_tokens") is not None
        await pilot.press("f")
        await pilot.pause()
        text = screen_text(app)
        assert f"longest real sample {max(train)} tokens (measured)" in text
    progressed = [m for m in messages if isinstance(m, OomDoctorApp.LengthsProgressed)]
    assert progressed and progressed[-1].done == progressed[-1].total == len(train) + 8  # train + tiny_val


@pytest.mark.skipif(not HAS_LLAMAFACTORY, reason="measuring lengths needs LLaMA-Factory (the train extra)")
async def test_measure_key_from_the_facts_tab_in_chinese(
    tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path, gpu_source: Any
) -> None:
    config, log = _long_sample_run(tmp_path, tiny_qwen3_dir, tiny_dataset_dir)
    app = _app(config, log, tmp_path, gpu_source, lang="zh")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("f")
        await pilot.pause()
        assert "m 统计长度" in screen_text(app)
        await pilot.press("m")
        await _wait_measured(app, pilot)
        longest = max(_direct_counts(tiny_qwen3_dir, tiny_dataset_dir, "tiny_train"))
        assert app.session.facts.data.max_tokens == longest
        assert f"实际最长样本 {longest} tokens(已实测)" in screen_text(app)


def _slow_token_lengths(calls: dict[str, Any]) -> Any:
    """Stands in for ``token_lengths`` to test stopping: reports progress until its callback raises."""

    def token_lengths(config: Any, *, cutoff_len: int | None = None, progress: Any = None) -> DataFacts:
        calls["started"].set()
        try:
            for done in range(10_000):
                progress(done, 10_000)
                time.sleep(0.005)
        except BaseException as err:
            calls["raised"] = type(err).__name__
            raise
        finally:
            calls["ended"].set()
        return DataFacts(source="tokenized", max_tokens=1)

    return token_lengths


@pytest.mark.parametrize("key", ["s", "escape"])
async def test_s_or_escape_stops_measuring_and_keeps_the_old_facts(
    user_dir: Path, gpu_source: Any, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    calls: dict[str, Any] = {"started": threading.Event(), "ended": threading.Event()}
    monkeypatch.setattr("oomdoctor.facts.dataset.token_lengths", _slow_token_lengths(calls))
    app = _app(user_dir / "configs/qwen3_lora.yaml", user_dir / "qwen3_lora.log", user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        facts = app.session.facts
        assert facts is not None and facts.data is None
        await pilot.press("m")
        assert calls["started"].wait(10)
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "Measuring lengths:" in text and "/10000 samples (s stops)" in text
        assert "s Stop measuring" in text and "m Measure" not in text  # a key the browser leaves alone
        assert isinstance(app.screen, MainScreen)
        await pilot.press(key)
        assert calls["ended"].wait(10)
        await pilot.pause()
        await pilot.pause()
        assert calls["raised"] == "MeasuringStopped"
        assert not app.session.measuring and app.session.facts is facts and facts.data is None
        text = screen_text(app)
        assert "Measuring lengths" not in text and "m Measure" in text


async def test_no_tokenizer_on_this_machine_is_a_one_line_error(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/absent_model.yaml"
    raw = yaml.safe_load((user_dir / "configs/qwen3_lora.yaml").read_text(encoding="utf-8"))
    raw["model_name_or_path"] = str(user_dir / "models" / "not-downloaded")
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    app = _app(config, user_dir / "qwen3_lora.log", user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("m")
        await settle(app, pilot)
        assert isinstance(app.screen, ErrorScreen)
        assert "no tokenizer for" in app.screen.message and "\n" not in app.screen.message
        assert not app.session.measuring
        await pilot.press("escape")
        await pilot.pause()
        assert "Measuring lengths" not in screen_text(app)


async def test_measure_is_offered_only_with_a_config(user_dir: Path, gpu_source: Any) -> None:
    app = build_app(None, user_dir / "qwen3_lora.log", "en", gpu_source, lambda *a, **k: None, fixed_clock,
                    cwd=user_dir)  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert app.session.facts is not None and app.session.facts.config is None
        assert app.screen.check_action("measure_lengths", ()) is False
        assert "m Measure" not in screen_text(app).splitlines()[-1]


def test_progress_messages_coalesce() -> None:
    first, second = OomDoctorApp.LengthsProgressed(1, 10), OomDoctorApp.LengthsProgressed(2, 10)
    assert second.can_replace(first)
    assert not second.can_replace(OomDoctorApp.TrialLogGrew())
