"""One text in both languages: the one type every bilingual text in oomdoctor is (rule texts, findings,
questions, proposals, estimate and probe notes, comparison notes, log evidence).

A frozen value with ``en`` and ``zh``; ``pick(lang)`` gives one. It is also, read-only, the dict
``{"en": ..., "zh": ...}`` that these texts were before it: ``text["en"]`` and ``text.get("zh")`` work, it
equals that dict, and ``json.dumps``, ``records.asdict`` and ``facts.types.to_jsonable`` write exactly
that dict, so every JSON output (``--json``, change.json, result.json) is unchanged. Changing it raises.
No imports of the project: anything may use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, NoReturn

from oomdoctor.records import record

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")


@record(frozen=True, eq=False)
class Text(dict[str, str]):
    """A text in English and Chinese."""

    en: str
    zh: str

    def __post_init__(self) -> None:
        dict.__init__(self, en=self.en, zh=self.zh)

    @classmethod
    def of(cls, value: Mapping[str, str]) -> Text:
        """From ``{"en": ..., "zh": ...}`` (a language left out is empty); a ``Text`` is returned as it is."""
        if isinstance(value, Text):
            return value
        return cls(en=value.get("en") or "", zh=value.get("zh") or "")

    @classmethod
    def each(cls, make: Callable[[Lang], str]) -> Text:
        """The text ``make(lang)`` gives for each language."""
        return cls(en=make("en"), zh=make("zh"))

    def pick(self, lang: str) -> str:
        """The text in ``lang``, falling back to the other language rather than to nothing."""
        return (self.zh or self.en) if lang == "zh" else (self.en or self.zh)

    def joined(self) -> str:
        """Both languages on one line, "en / zh" (how a one-line error shows them)."""
        return f"{self.en} / {self.zh}"

    def as_dict(self) -> dict[str, str]:
        return {"en": self.en, "zh": self.zh}

    # --- a value: equal to its dict, hashable, copied and pickled by its two texts, never changed -------------

    def __hash__(self) -> int:  # type: ignore[override]  # dict is unhashable; a Text is a value
        return hash((self.en, self.zh))

    def __reduce__(self) -> tuple[type[Text], tuple[str, str]]:
        return (Text, (self.en, self.zh))

    def __repr__(self) -> str:
        return f"Text(en={self.en!r}, zh={self.zh!r})"

    def _frozen(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a Text is frozen: make a new one")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = __ior__ = _frozen
