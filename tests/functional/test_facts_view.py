"""The facts view says things once, in the interface language, and as nvidia-smi would show them: the
no-GPU reason in one language (also in ``oomdoctor watch``), and the estimate's nvidia-smi band capped
at the card's total while the estimator's own numbers stay as they are."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from functional.tui_helpers import (
    fixed_clock,
    make_diagnosis,
    make_facts,
    screen_text,
    settle,
    show_diagnosis,
)
from oomdoctor import records
from oomdoctor.commands.watch import watch
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.i18n import Lang
from oomdoctor.tui import render
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.strings import t

REASON = {"en": "no NVIDIA driver found (scripted)", "zh": "未找到 NVIDIA 驱动(脚本)"}


class NoGpuSaysWhyInOneLanguage(FakeGpuSource):
    """No GPU, with the reason as NvmlSource gives it: both languages joined, and ``reason_in(lang)``."""

    def __init__(self) -> None:
        super().__init__((), reason=f"{REASON['en']} / {REASON['zh']}", driver=None)

    def reason_in(self, lang: Lang) -> str:
        return REASON[lang]


async def test_no_gpu_reason_is_shown_in_the_interface_language(user_dir: Path) -> None:
    source = NoGpuSaysWhyInOneLanguage()
    app = build_app(user_dir / "configs/qwen3_lora.yaml", user_dir / "qwen3_lora.log", "zh", source,
                    lambda *a, **k: None, fixed_clock, cwd=user_dir)  # fmt: skip
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.session.facts is not None and app.session.facts.gpu is not None
        assert app.session.facts.gpu.reason == f"{REASON['en']} / {REASON['zh']}"  # JSON keeps both
        await pilot.press("f")
        await pilot.pause()
        zh = screen_text(app)
        assert f"不可用:{REASON['zh']}" in zh and REASON["en"] not in zh
        await pilot.press("l")
        await pilot.pause()
        await pilot.pause()
        en = screen_text(app)
        assert f"not available: {REASON['en']}" in en and REASON["zh"] not in en


def test_a_source_without_reason_in_shows_what_it_has() -> None:
    from oomdoctor.facts.gpu import read_gpu
    from oomdoctor.rules.assemble import facts_of

    facts = facts_of(gpu=read_gpu(FakeGpuSource.unavailable("no driver (scripted)")))
    assert render.gpu_line(facts, "en") == "not available: no driver (scripted)"
    assert render.gpu_line(facts, "zh", reason="没有驱动") == "不可用:没有驱动"
    assert render.gpu_line(facts_of(), "zh") == t("facts_no_gpu", "zh")


def test_watch_says_the_no_gpu_reason_in_one_language() -> None:
    for lang, other in (("zh", "en"), ("en", "zh")):
        out = io.StringIO()
        watch(NoGpuSaysWhyInOneLanguage(), lang=lang, once=True, out=out)  # type: ignore[arg-type]
        assert REASON[lang] in out.getvalue() and REASON[other] not in out.getvalue()


GIB = 1024.0


def test_nvidia_smi_band_is_capped_at_the_card() -> None:
    card = 31.74 * GIB
    band = (25.82 * GIB, 78.33 * GIB)  # the estimator's reserve band reaches past a 31.74 GiB card
    assert render.nvidia_smi_band(band, card, "en") == (
        "25.82 GiB up to the whole card (31.74 GiB): the allocator would fill it"
    )
    assert render.nvidia_smi_band(band, card, "zh") == "25.82 GiB 直到整卡 31.74 GiB(分配器会把整卡占满)"
    assert render.nvidia_smi_band((8.76 * GIB, 29.96 * GIB), card, "en") == "8.76 GiB–29.96 GiB"
    assert render.nvidia_smi_band((40 * GIB, 50 * GIB), card, "en") == "more than the whole card (31.74 GiB)"
    assert render.nvidia_smi_band(band, None, "en") == "25.82 GiB–78.33 GiB"  # card unknown: as estimated


def test_facts_row_caps_the_band_and_leaves_the_estimate_alone(user_dir: Path, gpu_source: Any) -> None:
    facts = make_facts(user_dir / "configs/qwen3_lora.yaml", gpu_source)
    facts = records.replace(
        facts, estimate=records.replace(facts.estimate, expected_nvidia_smi_mib=(26440.0, 80210.0))
    )
    rows = dict(render.facts_rows(facts, make_diagnosis(), "en"))
    assert rows["Estimate"] == (
        "peak 34.30 GiB allocated, nvidia-smi 25.82 GiB up to the whole card (32.00 GiB): the allocator "
        "would fill it; largest term: logits + loss (does not fit)"
    )
    assert facts.estimate.expected_nvidia_smi_mib == (26440.0, 80210.0)
    zh = dict(render.facts_rows(facts, make_diagnosis(), "zh"))
    assert zh["估算"].startswith("峰值 34.30 GiB(已分配),nvidia-smi 25.82 GiB 直到整卡 32.00 GiB")
    assert zh["估算"].endswith("(放不下)")


async def test_facts_tab_shows_the_capped_band(user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    facts = make_facts(config, gpu_source)
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=lambda *a, **k: None, clock=fixed_clock,
                    cwd=user_dir, scan_at_start=False)  # fmt: skip
    async with app.run_test(size=(120, 40)) as pilot:
        await show_diagnosis(app, pilot, facts, make_diagnosis(), config, user_dir / "qwen3_lora.log")
        await pilot.press("f")
        await pilot.pause()
        text = screen_text(app)
    # make_facts' band (35.25-37.50 GiB) starts above its 32 GiB card
    assert "nvidia-smi more than the whole card (32.00 GiB)" in text
