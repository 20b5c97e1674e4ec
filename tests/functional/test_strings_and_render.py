"""The TUI's zh/en catalog is complete and consistent, and the formatting helpers say what they should."""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest

from oomdoctor.diagnosis import Diagnosis, EstimatedEffect, Proposal
from oomdoctor.facts.types import CAUSES, PHASES
from oomdoctor.rules.assemble import facts_of
from oomdoctor.tui import render
from oomdoctor.tui.strings import TEXTS, t

TUI_SOURCES = Path(render.__file__).parent
# Keys looked up by a computed name: f"key_{binding.id}", f"tab_{pane}", f"phase_{phase}", ...
DYNAMIC_PREFIXES = ("key_", "tab_", "phase_", "cause_", "term_", "outcome_", "trial_phase_", "chart_")


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("key", sorted(TEXTS))
def test_every_text_exists_in_both_languages_with_the_same_fields(key: str) -> None:
    entry = TEXTS[key]
    assert set(entry) == {"en", "zh"}
    assert entry["en"].strip() and entry["zh"].strip()
    assert _fields(entry["en"]) == _fields(entry["zh"])


def test_every_text_is_used() -> None:
    source = "\n".join(
        p.read_text(encoding="utf-8") for p in TUI_SOURCES.glob("*.py") if p.name != "strings.py"
    )
    literal = set(re.findall(r"[\"']([a-z0-9_]+)[\"']", source))
    unused = [k for k in TEXTS if k not in literal and not k.startswith(DYNAMIC_PREFIXES)]
    assert unused == []


def test_every_phase_cause_and_outcome_has_a_name() -> None:
    from oomdoctor.tui.session import OUTCOMES

    for phase in PHASES:
        assert f"phase_{phase}" in TEXTS
    for cause in CAUSES:
        assert f"cause_{cause}" in TEXTS
    for outcome in OUTCOMES:
        assert f"outcome_{outcome}" in TEXTS


def test_every_binding_has_an_id_a_description_and_both_languages() -> None:
    from oomdoctor.tui.app import OomDoctorApp
    from oomdoctor.tui.screens import DoctorModal, MainScreen, PickerScreen
    from oomdoctor.tui.trial_screen import TrialScreen

    for owner in (OomDoctorApp, MainScreen, PickerScreen, TrialScreen, DoctorModal):
        for binding in owner.BINDINGS:
            assert binding.id, f"{owner.__name__} {binding.key} has no id"
            assert binding.description and binding.tooltip
            if binding.show:
                assert f"key_{binding.id}" in TEXTS and f"key_{binding.id}_tip" in TEXTS


def test_sizes_read_like_the_oom_message() -> None:
    assert render.fmt_mib(512) == "512 MiB"
    assert render.fmt_mib(2375.7) == "2.32 GiB"
    assert render.fmt_mib(None, "zh") == t("value_na", "zh")
    assert render.fmt_count(596_049_920) == "596M" and render.fmt_count(7_615_616_512) == "7.6B"


def test_display_command_is_relative_only_when_it_runs_here(tmp_path: Path) -> None:
    config = tmp_path / "trials/01-x/config.yaml"
    assert render.display_command(f"llamafactory-cli train {config}", tmp_path) == (
        "llamafactory-cli train trials/01-x/config.yaml"
    )
    env = f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True llamafactory-cli train {config}"
    assert render.display_command(env, tmp_path).endswith(" llamafactory-cli train trials/01-x/config.yaml")
    with_cd = f"cd /elsewhere && llamafactory-cli train {config}"
    assert render.display_command(with_cd, tmp_path) == with_cd  # after a cd, a relative path would be wrong


def test_diff_lines_show_removed_keys_env_and_files() -> None:
    proposal = Proposal(
        rule="x.y",
        title={"en": "t", "zh": "t"},
        changes={"deepspeed": [None, "ds_z3_offload.json"], "packing": [True, None]},
        why={},
        cost={},
        judge={},
        cause="optimizer_state",
        env={"FORCE_TORCHRUN": "1"},
        files={"ds_z3_offload.json": {}},
    )
    lines = [(d.sign, d.text) for d in render.diff_lines(proposal, "en")]
    assert lines == [
        ("+", "deepspeed: ds_z3_offload.json"),
        ("-", "packing: true"),
        ("+", "# packing (removed)"),
        ("+", "environment: FORCE_TORCHRUN=1"),
        ("+", "new file: ds_z3_offload.json"),
    ]


def test_effect_and_oom_lines() -> None:
    effect = EstimatedEffect(before_mib=35120.0, after_mib=18400.0, fits_after=True)
    assert render.effect_line(effect, "en") == "peak 34.30 GiB → 17.97 GiB (fits the card)"
    assert render.effect_line(None, "en") is None
    assert render.oom_summary(None, facts_of(), "en") == t("oom_no_log", "en")
    no_oom = Diagnosis(oom=False, phase="none", cause="unknown")
    assert render.oom_summary(no_oom, None, "zh") == t("oom_none", "zh")
