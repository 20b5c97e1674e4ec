"""The whole loop on real files through the real core (config and log readers, estimator, rules, patch
writer): load -> answer -> proposal -> apply -> the new folder holds the change. Only the GPU is scripted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from functional.tui_helpers import ScriptedTrial, fixed_clock, screen_text
from oomdoctor.demo import demo_paths
from oomdoctor.tui.app import OomDoctorApp
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import ApplyScreen, MainScreen
from oomdoctor.tui.widgets import QuestionPanel

# An OOM message alone: the log cannot say when it happened, so the engine has to ask. (The request is not the
# size of the demo batch's logits: a message of exactly that size is placed in the training step by its size.)
ONE_LINE_LOG = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.57 GiB. GPU 0 has a total capacity of "
    "31.73 GiB of which 1.20 GiB is free.\n"
)


def _unique(messages: list[Any], kind: type) -> list[Any]:
    return [m for m in {id(m): m for m in messages}.values() if isinstance(m, kind)]


async def _settle(app: OomDoctorApp, pilot: Any) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


async def test_answer_then_apply_on_real_files(user_dir: Path, gpu_source: Any) -> None:
    config, _ = demo_paths()
    log = user_dir / "train.log"
    log.write_text(ONE_LINE_LOG, encoding="utf-8")
    before = config.read_text(encoding="utf-8")
    app = build_app(config, log, "en", gpu_source, ScriptedTrial(), fixed_clock, cwd=user_dir)
    messages: list[Any] = []
    async with app.run_test(size=(80, 24), message_hook=messages.append) as pilot:
        await _settle(app, pilot)
        assert isinstance(app.screen, MainScreen)
        pending = app.session.pending_questions
        assert pending and pending[0].key == "phase"  # the log alone cannot tell when it ran out
        first_batch = 1 + pending[0].allowed.index("first_batch")
        await pilot.press(str(first_batch))
        await _settle(app, pilot)
        assert app.session.facts is not None and app.session.facts.answers["phase"] == "first_batch"
        assert app.session.diagnosis is not None and app.session.diagnosis.phase == "first_batch"
        assert app.session.pending_questions == []
        proposal = app.session.current_proposal
        assert proposal is not None and "per_device_train_batch_size" in proposal.changes
        old, new = proposal.changes["per_device_train_batch_size"]
        assert new < old
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, ApplyScreen)
        await pilot.press("enter")
        await _settle(app, pilot)
        text = screen_text(app)
    [written] = _unique(messages, OomDoctorApp.PatchWritten)
    folder = written.result.folder
    assert folder.parent == user_dir / "trials" and folder.name.startswith("01-")
    new_config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    assert new_config["per_device_train_batch_size"] == new
    change = json.loads((folder / "change.json").read_text(encoding="utf-8"))
    assert change["rule"] == proposal.rule
    assert change["changes"]["per_device_train_batch_size"] == [old, new]
    assert config.read_text(encoding="utf-8") == before  # the bundled config is only read
    assert f"Written to trials/{folder.name}" in text
    answered = _unique(messages, QuestionPanel.Answered)
    assert [(m.key, m.value) for m in answered] == [("phase", "first_batch")]
    assert len(_unique(messages, OomDoctorApp.DiagnosisReady)) == 2


async def test_demo_case_proposes_and_writes_a_batch_change(user_dir: Path, gpu_source: Any) -> None:
    """``oomdoctor demo``: the course config with its OOM log, straight to the proposals."""
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=ScriptedTrial(), clock=fixed_clock,
                    cwd=user_dir, demo=True)  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(app, pilot)
        diagnosis = app.session.diagnosis
        assert diagnosis is not None and diagnosis.oom
        assert "demo case" in screen_text(app)
        # the demo knows the course's measured lengths: batches pad to 960, not to cutoff_len
        facts = app.session.facts
        assert facts is not None and facts.data is not None and facts.data.max_tokens == 957
        assert facts.estimate is not None and facts.estimate.padded_len == 960
        proposals = app.session.proposals
        assert proposals, "the demo case must lead to at least one proposal"
        # walk the alternatives with n to the one that changes the micro-batch, as a user would
        wanted = next(i for i, p in enumerate(proposals) if "per_device_train_batch_size" in p.changes)
        for _ in range(wanted):
            await pilot.press("n")
        await pilot.pause()
        proposal = app.session.current_proposal
        assert proposal is proposals[wanted]
        await pilot.press("a")
        await pilot.pause()
        await pilot.press("enter")
        await _settle(app, pilot)
        entry = app.session.history[0]
    new_config = yaml.safe_load(entry.config_path.read_text(encoding="utf-8"))
    assert new_config["per_device_train_batch_size"] == proposal.changes["per_device_train_batch_size"][1]
    assert json.loads((entry.folder / "change.json").read_text(encoding="utf-8"))["rule"] == proposal.rule
