"""The one bilingual type: a frozen value that reads, compares and serialises as {"en": ..., "zh": ...}, and the
only form a text in both languages takes in a diagnosis."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest

from oomdoctor import records
from oomdoctor.api import run_diagnosis
from oomdoctor.i18n import Bilingual, both, in_lang, msg, pick
from oomdoctor.resources import configs_dir
from oomdoctor.text import Text

CONFIG = configs_dir() / "keywords_clean_train.yaml"
LOG = configs_dir() / "demo" / "train.log"


def test_pick_gives_the_language_and_falls_back_to_the_other() -> None:
    text = Text(en="out of memory", zh="显存不足")
    assert text.pick("en") == "out of memory" and text.pick("zh") == "显存不足"
    assert Text(en="only en", zh="").pick("zh") == "only en"
    assert Text(en="", zh="只有中文").pick("en") == "只有中文"
    assert pick(text, "zh") == "显存不足" and pick({"en": "a"}, "zh") == "a" and pick(None, "en") == ""


def test_it_reads_compares_and_serialises_as_its_dict() -> None:
    text = Text(en="a", zh="甲")
    assert text == {"en": "a", "zh": "甲"} and text["zh"] == "甲" and text.get("en") == "a"
    assert json.loads(json.dumps(text)) == {"en": "a", "zh": "甲"}

    @dataclasses.dataclass
    class Holder:
        one: Text
        many: list[Text]

    @records.record
    class Record:
        one: Text
        many: list[Text]

    for holder in (Holder(text, [text]), Record(text, [text])):  # a stdlib dataclass or a record holding it
        plain = records.asdict(holder)
        assert plain == {"one": {"en": "a", "zh": "甲"}, "many": [{"en": "a", "zh": "甲"}]}
        assert type(plain["one"]) is dict


def test_it_is_a_value_that_cannot_change() -> None:
    text = Text(en="a", zh="甲")
    with pytest.raises(TypeError):
        text["en"] = "b"
    with pytest.raises(TypeError):
        text.update(en="b")
    with pytest.raises(records.FrozenRecordError):
        text.en = "b"  # type: ignore[misc]
    assert text == {"en": "a", "zh": "甲"}
    for again in (copy.copy(text), copy.deepcopy(text), pickle.loads(pickle.dumps(text))):
        assert type(again) is Text and again == text
    assert hash(text) == hash(Text(en="a", zh="甲")) and len({text, Text(en="a", zh="甲")}) == 1


def test_of_and_each_make_one() -> None:
    assert Text.of({"en": "a", "zh": "甲"}) == Text(en="a", zh="甲")
    assert Text.of({"en": "a"}) == Text(en="a", zh="")
    same = Text(en="x", zh="乙")
    assert Text.of(same) is same
    assert Text.each(lambda lang: lang.upper()) == Text(en="EN", zh="ZH")


def test_the_catalogue_lookups_give_one_and_fill_a_text_field_per_language() -> None:
    message = both("effect_phase", phase=both("estimate_phase_eval"))
    assert isinstance(message, Text)
    assert message.en == msg("effect_phase", "en", phase=msg("estimate_phase_eval", "en"))
    assert message.zh == msg("effect_phase", "zh", phase=msg("estimate_phase_eval", "zh"))
    line = msg("log_empty", None, path="a.log")
    assert isinstance(line, Bilingual) and line == f"{line.text.en} / {line.text.zh}"
    assert in_lang(ValueError(line), "zh") == line.text.zh


def _bilingual_values(value: Any, where: str = "") -> list[tuple[str, Any]]:
    """Every value shaped like a text in both languages, with where it is."""
    if records.is_record(value) and not isinstance(value, type) and not isinstance(value, Text):
        value = {f.name: getattr(value, f.name) for f in records.fields(value)}
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict) and set(value) == {"en", "zh"}:
        return [(where, value)]
    if isinstance(value, dict):
        return [hit for k, v in value.items() for hit in _bilingual_values(v, f"{where}.{k}")]
    if isinstance(value, list | tuple):
        return [hit for i, v in enumerate(value) for hit in _bilingual_values(v, f"{where}[{i}]")]
    return []


def test_every_text_of_a_diagnosis_is_the_one_type_and_its_json_is_plain() -> None:
    diagnosis = run_diagnosis(CONFIG, LOG)
    # ``facts`` is the facts' summary, already in its JSON form (plain dicts)
    found = [(w, v) for w, v in _bilingual_values(diagnosis) if not w.startswith(".facts.")]
    assert len(found) > 10  # findings, the proposal's texts, its alternatives
    assert [where for where, value in found if type(value) is not Text] == []
    out = json.loads(json.dumps(diagnosis.to_json(), ensure_ascii=False))
    assert out["proposal"]["title"] == dict(diagnosis.proposal.title)  # type: ignore[union-attr]
