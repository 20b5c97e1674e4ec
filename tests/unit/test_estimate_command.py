"""``oomdoctor estimate``: the JSON contract, the readable table in both languages, card names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomdoctor.cli import main
from oomdoctor.errors import BadInput
from oomdoctor.estimate.cards import card_by_name, card_names

REPO = Path(__file__).resolve().parents[2]
COURSE_CONFIG = REPO / "configs" / "keywords_clean_train.yaml"


@pytest.mark.parametrize(
    ("typed", "name", "mib"),
    [
        ("V100-32GB", "V100-32GB", 32510),
        ("Tesla V100-SXM2-32GB", "V100-32GB", 32510),
        ("v100 16gb", "V100-16GB", 16160),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB", 81920),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 24564),
        ("A10G", "A10G", 23028),
        ("NVIDIA H100 80GB HBM3", "H100-80GB", 81559),
        ("h20", "H20", 97871),
        ("Tesla T4", "T4", 15360),
    ],
)
def test_card_names_as_people_and_nvidia_smi_write_them(typed: str, name: str, mib: int) -> None:
    card = card_by_name(typed)
    assert (card.name, card.total_mib) == (name, mib)


def test_bf16_support_follows_the_architecture() -> None:
    assert not card_by_name("V100-32GB").bf16 and not card_by_name("T4").bf16
    assert card_by_name("A100-80GB").bf16 and card_by_name("RTX 4090").bf16


def test_ambiguous_or_unknown_card_is_bad_input_listing_the_names() -> None:
    with pytest.raises(BadInput) as err:
        card_by_name("V100")  # 16 or 32 GB?
    assert "V100-32GB" in str(err.value) and "V100-16GB" in str(err.value)
    assert len(card_names()) >= 15


def _run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["estimate", "--config", str(COURSE_CONFIG), "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    data = _run_json(capsys, "--longest-tokens", "957", "--eval-longest-tokens", "604", "--gpu", "V100-32GB")
    for key in ("peak_allocated_mib", "expected_nvidia_smi_mib", "phases", "terms", "dominant_term", "fits"):
        assert key in data
    assert set(data["phases"]) == {"load", "train", "eval"}
    assert set(data["terms"]) == {
        "weights",
        "trainable_state",
        "activations",
        "logits_loss",
        "eval",
        "overhead",
    }
    low, high = data["expected_nvidia_smi_mib"]
    assert low < 22230 < 28588 < high  # both measured course runs lie in the band
    assert data["dominant_term"] == "logits_loss"
    assert data["padded_len"] == 960 and data["padded_len_source"] == "longest_sample"
    assert data["gpu_total_mib"] == 32510 and data["card"] == "V100-32GB"
    assert data["fitting_micro_batch"] == 2 and data["fitting_accumulation"] == 16
    assert data["model"]["source"] == "table:qwen3-0.6b"
    assert all(set(note) == {"en", "zh"} for note in data["notes"])


def test_without_lengths_it_pads_to_cutoff_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    data = _run_json(capsys, "--gpu-mib", "32510")
    assert data["padded_len"] == 2048 and data["padded_len_source"] == "cutoff_len"
    assert any("oomdoctor lengths" in note["en"] for note in data["notes"])


@pytest.mark.parametrize(
    ("lang", "words"),
    [
        ("en", ["Terms (MiB)", "logits + loss", "nvidia-smi should show"]),
        ("zh", ["分项(MiB)", "logits 与损失", "nvidia-smi 预计显示"]),
    ],
)
def test_readable_table_in_both_languages(
    capsys: pytest.CaptureFixture[str], lang: str, words: list[str]
) -> None:
    code = main(
        [
            "--lang",
            lang,
            "estimate",
            "--config",
            str(COURSE_CONFIG),
            "--longest-tokens",
            "957",
            "--gpu",
            "V100-32GB",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    for word in words:
        assert word in out
    assert "6,677" in out  # the logits term at 4 x 960 x 151,936 x 12 bytes


def test_bad_card_and_bad_numbers_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--config", str(COURSE_CONFIG), "--gpu", "V100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "V100-32GB" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["estimate", "--config", str(COURSE_CONFIG), "--longest-tokens", "-5"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        main(["estimate", "--config", str(COURSE_CONFIG), "--gpu", "T4", "--gpu-mib", "1000"])


def test_unknown_model_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "train.yaml"
    config.write_text("model_name_or_path: acme/Mystery-7B\nstage: sft\n", encoding="utf-8")
    assert main(["estimate", "--config", str(config), "--gpu-mib", "24000"]) == 2
    assert "acme/Mystery-7B" in capsys.readouterr().err


def test_band_never_reads_above_a_known_card(capsys: pytest.CaptureFixture[str]) -> None:
    """On a 24 GB card the course's batch-4 run fits as tensors but its cache would grow past the card:
    the JSON keeps the estimator's band and adds what the card can show; the text says the cache fills it."""
    args = ["--longest-tokens", "957", "--eval-longest-tokens", "604", "--gpu", "RTX 4090"]
    data = _run_json(capsys, *args)
    low, high = data["expected_nvidia_smi_mib"]
    assert high > 24564 and data["fills_card"] is True
    assert data["expected_nvidia_smi_on_card_mib"] == [low, 24564]
    assert data["fits"] is False and data["allocated_fits"] is True
    reserved_low, reserved_high = data["expected_reserved_mib"]
    assert reserved_low < low and reserved_high < high  # the band without the CUDA context
    for lang, words in (("en", "up to the whole card (24,564 MiB)"), ("zh", "直至占满整卡(24,564 MiB)")):
        assert main(["--lang", lang, "estimate", "--config", str(COURSE_CONFIG), *args]) == 0
        out = capsys.readouterr().out
        assert words in out and f"{high:,.0f}" not in out


def test_fitting_card_reports_no_fill_and_the_full_band(capsys: pytest.CaptureFixture[str]) -> None:
    data = _run_json(capsys, "--longest-tokens", "957", "--eval-longest-tokens", "604", "--gpu", "A100-80GB")
    assert data["fills_card"] is False and data["fits"] is True
    assert data["expected_nvidia_smi_on_card_mib"] == data["expected_nvidia_smi_mib"]


def test_peak_beyond_the_card_says_nvidia_smi_cannot_show_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--lang", "en", "estimate", "--config", str(COURSE_CONFIG), "--gpu", "T4"]) == 0
    out = capsys.readouterr().out
    assert "nvidia-smi cannot show it" in out and "does not fit" in out


def test_chinese_table_columns_line_up(capsys: pytest.CaptureFixture[str]) -> None:
    """Chinese labels are two terminal columns per character: the numbers still end in one column."""
    import unicodedata

    assert main(["--lang", "zh", "estimate", "--config", str(COURSE_CONFIG), "--longest-tokens", "957"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("分项(MiB)")
    rows = [line.split("  <-")[0] for line in out[start + 1 : start + 7]]

    def width(text: str) -> int:
        return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)

    assert len({width(row) for row in rows}) == 1, rows
