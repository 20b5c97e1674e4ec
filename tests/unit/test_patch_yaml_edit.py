"""patch/yaml_edit.py: values render so that YAML readers get them back; edits touch only their lines."""

from __future__ import annotations

import pytest
import yaml

from oomdoctor.patch.yaml_edit import EditError, KeyEdit, apply_edits, render_scalar

VALUES = [
    0,
    -3,
    2048,
    5e-5,
    2.5e-05,
    1e20,
    0.1,
    3.0,
    float("inf"),
    True,
    False,
    None,
    "all",
    "q_proj,v_proj",
    "a: b",
    "#x",
    "x #y",
    "yes",
    "null",
    "1.0",
    "5e-05",
    "",
    " padded ",
    "中文 注释",
    "it's",
    'say "hi"',
    "expandable_segments:True",
    ["a", "b"],
    {"k": 1, "nested": [1, 2]},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_render_reads_back_with_pyyaml(value):
    assert yaml.safe_load(f"k: {render_scalar(value)}\n")["k"] == value


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_render_reads_back_with_omegaconf(value, tmp_path):
    """LLaMA-Factory loads configs with OmegaConf.load; it must read the same value."""
    omegaconf = pytest.importorskip("omegaconf")
    if isinstance(value, float) and value == float("inf"):
        pytest.skip("not a training value")
    path = tmp_path / "c.yaml"
    path.write_text(f"k: {render_scalar(value)}\n", encoding="utf-8")
    loaded = omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.load(path))
    assert loaded["k"] == value


@pytest.mark.parametrize(
    ("value", "quote", "text"), [("x", "'", "'x'"), ("it's", "'", "'it''s'"), ("x", '"', '"x"')]
)
def test_quote_style_is_reused(value, quote, text):
    assert render_scalar(value, quote=quote) == text


def test_comment_after_a_quoted_hash_is_found():
    text = 'template: "a # b"  # real comment\nother: 1\n'
    out = apply_edits(text, [KeyEdit("template", "c")], rule="r").text
    assert out == 'template: "c"  # oomdoctor: was "a # b" | real comment\nother: 1\n'


def test_edit_without_comment_and_null_value():
    text = "a: 1\nempty:\ntilde: ~\nlast: 2"  # no newline at the end
    out = apply_edits(
        text, [KeyEdit("empty", 3), KeyEdit("tilde", "x"), KeyEdit("new", 5, note="was 8")], rule="r.id"
    )
    assert out.text == (
        "a: 1\nempty: 3  # oomdoctor: was empty\ntilde: x  # oomdoctor: was ~\nlast: 2\n\n# oomdoctor: r.id\nnew: 5  # oomdoctor: was 8\n"
    )
    assert out.changed_in_place == ["empty", "tilde"] and out.appended == ["new"]


def test_removing_an_absent_key_is_a_no_op():
    text = "a: 1\n"
    assert apply_edits(text, [KeyEdit("b", remove=True)], rule="r").text == text


def test_block_scalar_value_is_replaced_whole():
    text = "a: |\n  line one\n  line two\nb: 2\n"
    out = apply_edits(text, [KeyEdit("a", "short")], rule="r").text
    assert out.startswith("a: short  # oomdoctor: was ")
    assert out.endswith("b: 2\n") and "\n  line one" not in out and len(out.splitlines()) == 2


def test_nested_mapping_value_is_replaced_whole():
    text = "deepspeed:\n  zero_optimization:\n    stage: 3\n# after\nb: 2\n"
    out = apply_edits(text, [KeyEdit("deepspeed", "/abs/ds.json")], rule="r").text
    assert yaml.safe_load(out) == {"deepspeed": "/abs/ds.json", "b": 2}
    assert "# after\nb: 2\n" in out


def test_documents_that_are_not_mappings_are_refused():
    with pytest.raises(EditError):
        apply_edits("- a\n- b\n", [KeyEdit("a", 1)], rule="r")
    with pytest.raises(EditError):
        apply_edits("{a: 1, b: 2}\n", [KeyEdit("a", 2)], rule="r")
