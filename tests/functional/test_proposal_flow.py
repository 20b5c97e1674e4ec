"""The diagnosis screen driven with Pilot: facts, questions, proposals, Apply (the real patch writer),
Explain, Copy, the language switch, and errors as one-line dialogs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from functional.tui_helpers import fixed_clock, make_diagnosis, make_facts, screen_text, show_diagnosis
from oomdoctor.tui.app import OomDoctorApp
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import ApplyScreen, CommandScreen, ErrorScreen, ExplainScreen, MainScreen
from oomdoctor.tui.widgets import QuestionPanel


def _unique(messages: Any) -> list[Any]:
    """A bubbling message reaches the hook once per node it passes; count it once."""
    return list({id(m): m for m in messages}.values())


def _app(user_dir: Path, gpu_source: Any, lang: str = "en", **kwargs: Any) -> OomDoctorApp:
    return build_app(lang=lang, gpu_source=gpu_source, trial_launcher=kwargs.pop("trial_launcher", None) or (lambda *a, **k: None),
                     clock=fixed_clock, cwd=user_dir, scan_at_start=False, **kwargs)  # fmt: skip


async def test_facts_view_shows_the_run_as_llamafactory_sees_it(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(120, 40)) as pilot:
        await show_diagnosis(
            app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
        )
        await pilot.press("f")
        await pilot.pause()
        text = screen_text(app)
    assert "config: configs/qwen3_lora.yaml" in text and "log: qwen3_lora.log" in text
    assert "4 per GPU × 8 accumulation = 32 effective" in text
    assert "on (by default)" in text  # gradient checkpointing, LLaMA-Factory's default
    assert "8 (8 by default)" in text  # the eval batch nobody set
    assert "Tesla V100-SXM2-32GB, 32.00 GiB, no bf16, other processes: 1 using 512 MiB" in text
    assert "Out of memory at the first batch; step 1 of 150" in text
    assert (
        "asked for 2.32 GiB" in text
        and "1.20 GiB free of" in text
        and "310 MiB reserved but unallocated" in text
    )
    assert str(user_dir) not in text  # paths relative to where the user is


async def test_proposal_next_alternative_and_explain(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await show_diagnosis(
            app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
        )
        text = screen_text(app)
        assert "Proposal 1 of 2" in text
        assert "- per_device_train_batch_size: 4" in text and "+ per_device_train_batch_size: 2" in text
        assert "a Apply" in text and "n Next" in text and "e Explain" in text
        assert "c Copy" not in text  # nothing written yet
        await pilot.press("n")
        await pilot.pause()
        assert app.session.current_proposal is not None
        assert app.session.current_proposal.rule == "eval.set_eval_batch"
        assert "+ per_device_eval_batch_size: 4" in screen_text(app)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExplainScreen)
        assert "Validation runs 8 samples at once" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        await pilot.press("n")
        await pilot.pause()
        assert app.session.current_proposal.rule == "first_batch.halve_micro_batch"


async def test_apply_writes_a_new_folder_and_shows_the_command(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    before = config.read_text(encoding="utf-8")
    app = _app(user_dir, gpu_source)
    messages: list[Any] = []
    async with app.run_test(size=(80, 24), message_hook=messages.append) as pilot:
        await show_diagnosis(
            app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
        )
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, ApplyScreen)
        assert "trials/01-halve_micro_batch" in screen_text(app)
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        text = screen_text(app)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CommandScreen)
        dialog = screen_text(app)
        clipboard = app.clipboard
        await pilot.press("b")  # closes without Esc
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
    folder = user_dir / "trials/01-halve_micro_batch"
    written = _unique(m for m in messages if isinstance(m, OomDoctorApp.PatchWritten))
    assert len(written) == 1 and written[0].result.folder == folder
    new = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    assert new["per_device_train_batch_size"] == 2 and new["gradient_accumulation_steps"] == 16
    assert Path(new["output_dir"]).resolve().is_relative_to(folder)  # a fresh output_dir inside the folder
    assert "### train" in (folder / "config.yaml").read_text(encoding="utf-8")  # comments kept
    change = json.loads((folder / "change.json").read_text(encoding="utf-8"))
    assert change["rule"] == "first_batch.halve_micro_batch"
    assert change["changes"]["per_device_train_batch_size"] == [4, 2]
    assert config.read_text(encoding="utf-8") == before  # the user's file untouched
    assert "Written to trials/01-halve_micro_batch" in text
    assert "llamafactory-cli train trials/01-halve_micro_batch/config.yaml" in text
    # never claims a copy it cannot see: the command to select, how, and the script that holds it
    assert "copied" not in text + dialog
    assert "Shift+drag" in dialog and "bash trials/01-halve_micro_batch/command.sh" in dialog
    assert "llamafactory-cli train" in dialog and "trials/01-halve_micro_batch/config.yaml" in dialog
    assert "also saved as trials/01-halve_micro_batch/command.sh" in text
    assert clipboard == written[0].result.command  # the request still goes to terminals that accept it
    assert (folder / "command.sh").is_file()
    assert [e.folder for e in app.session.history] == [folder]


async def test_apply_refuses_an_existing_folder(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await show_diagnosis(
            app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
        )
        await pilot.press("a")
        await pilot.pause()
        field = app.screen.query_one("#apply-folder")
        field.value = "configs"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ApplyScreen)
        assert "configs already exists" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
    assert not (user_dir / "trials").exists()


async def test_answering_reruns_the_engine_and_moves_along(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    facts = make_facts(config, gpu_source, phase="unknown")
    app = _app(user_dir, gpu_source)
    messages: list[Any] = []
    async with app.run_test(size=(80, 24), message_hook=messages.append) as pilot:
        await show_diagnosis(
            app, pilot, facts, make_diagnosis(questions=True), config, user_dir / "qwen3_lora.log"
        )
        text = screen_text(app)
        assert "Question 1 of 2" in text and "At which point did it stop?" in text
        assert "2 At the first training step" in text
        assert "a Apply" not in text  # answer first
        await pilot.press("2")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        answered = _unique(m for m in messages if isinstance(m, QuestionPanel.Answered))
        assert [(m.key, m.value) for m in answered] == [("phase", "first_batch")]
        assert app.session.facts.answers == {"phase": "first_batch"}  # a new bundle; the old one is frozen
        ready = _unique(m for m in messages if isinstance(m, OomDoctorApp.DiagnosisReady))
        assert len(ready) == 2  # the injected one, then the engine's re-run with the answer
        assert ready[-1].diagnosis.answers == {"phase": "first_batch"}
        assert all(q.key != "phase" for q in app.session.pending_questions)


async def test_skip_moves_to_the_next_question(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await show_diagnosis(app, pilot, make_facts(config, gpu_source, phase="unknown"),
                             make_diagnosis(questions=True), config, user_dir / "qwen3_lora.log")  # fmt: skip
        await pilot.press("0")
        await pilot.pause()
        text = screen_text(app)
        assert "Question 2 of 2" in text and "1 " in text
        await pilot.click("#answer-skip")
        await pilot.pause()
        assert app.session.pending_questions == []
        assert app.session.skipped == {"phase", "weights_loaded"}


async def test_language_switch_relabels_everything(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await show_diagnosis(
            app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
        )
        await pilot.press("l")
        await pilot.pause()
        text = screen_text(app)
        assert app.session.lang == "zh"
        assert "a 应用" in text and "q 退出" in text and "l English" in text
        assert "单卡 batch 减半" in text  # the rule's own zh title
        assert "显存溢出发生在第一个 batch" in text
        await pilot.press("l")
        await pilot.pause()
        assert "a Apply" in screen_text(app)


async def test_zh_from_the_start(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    app = _app(user_dir, gpu_source, lang="zh")
    async with app.run_test(size=(80, 24)) as pilot:
        await show_diagnosis(
            app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
        )
        text = screen_text(app)
    assert "建议 1/2" in text and "a 应用" in text


async def test_bad_config_becomes_a_one_line_error_dialog(user_dir: Path, gpu_source: Any) -> None:
    broken = user_dir / "broken.yaml"
    broken.write_text("model_name_or_path: [unclosed\n", encoding="utf-8")
    app = build_app(broken, None, "en", gpu_source, lambda *a, **k: None, fixed_clock, cwd=user_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen)
        message = app.screen.message
        assert "\n" not in message and "broken.yaml" in message
        assert "Traceback" not in screen_text(app)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert app.session.loading is False


async def test_quit_key_exits_cleanly(user_dir: Path, gpu_source: Any) -> None:
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value == 0
