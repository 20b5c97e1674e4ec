"""Two languages for every user-facing text: English and Chinese.

Every text in both languages is one ``oomdoctor.text.Text`` (rule texts, findings, proposals...). Texts that
the code itself prints live in the catalogue (``oomdoctor/catalogue/en.yaml`` and ``zh.yaml``), keyed by a
short name, and are looked up with ``msg()`` / ``both()``; ``MESSAGES`` is its ``core`` group as a read-only
mapping.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from oomdoctor import catalogue

if TYPE_CHECKING:
    from oomdoctor.text import Text

# The same two as oomdoctor.text's; spelt here too so that a start which only parses arguments (``--help``)
# imports neither oomdoctor.text nor oomdoctor.records (once the stdlib dataclasses: ~10 ms of inspect, ast, dis).
Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")

# What a text in both languages may arrive as: the one ``Text``, or its JSON form read back.
LocalText = Mapping[str, str]


def default_lang(environ: Mapping[str, str] | None = None) -> Lang:
    """The language from the environment: OOMDOCTOR_LANG, then LC_ALL / LC_MESSAGES / LANG (zh_* gives zh)."""
    env = os.environ if environ is None else environ
    for key in ("OOMDOCTOR_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(key, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def pick(text: LocalText | str | None, lang: Lang) -> str:
    """The text in ``lang``, falling back to the other language rather than to nothing."""
    if text is None:
        return ""
    if isinstance(text, str):
        return text
    return text.get(lang) or text.get("en") or text.get("zh") or ""


class Bilingual(str):
    """A ``Text`` as the one line a terminal error shows ("en / zh"): a ``str`` (what an exception and
    argparse carry), keeping the ``Text`` for a screen that knows which language its user reads."""

    text: Text

    def __new__(cls, text: Text) -> Bilingual:
        line = super().__new__(cls, text.joined())
        line.text = text
        return line

    def in_lang(self, lang: Lang) -> str:
        return self.text.pick(lang)


def in_lang(text: object, lang: Lang) -> str:
    """``text`` in ``lang`` when it carries both languages (a ``Bilingual``, or an error made of one)."""
    if isinstance(text, BaseException) and len(text.args) == 1:
        text = text.args[0]
    return text.in_lang(lang) if isinstance(text, Bilingual) else str(text)


def msg(key: str, lang: Lang | None = None, /, **fields: object) -> str:
    """A code-owned message. With ``lang=None`` both languages are joined (for one-line errors). A field
    given in both languages (a ``Text``) is filled in the message's language."""
    if lang is None:
        return Bilingual(both(key, **fields))
    return _fill(MESSAGES[key][lang], lang, fields)


def both(key: str, /, **fields: object) -> Text:
    """A code-owned message in both languages (for JSON output and findings)."""
    from oomdoctor.text import Text

    entry = MESSAGES[key]
    return Text.each(lambda lang: _fill(entry[lang], lang, fields))


def _fill(template: str, lang: Lang, fields: Mapping[str, object]) -> str:
    return template.format(**{k: pick(v, lang) if isinstance(v, Mapping) else v for k, v in fields.items()})


# --- `--help` texts ------------------------------------------------------------------------------------
# argparse keeps each help text as one plain string, fixed when the parser is built, so the command line
# picks the language first (``set_help_lang``) and every ``help=`` is written as ``help_text(key)``: a
# ``help_*`` key of the catalogue's ``core`` group, read only when a parser is built (only the verb that
# runs registers its options).

_help_lang: Lang = "en"


def set_help_lang(lang: Lang) -> None:
    """The language the next ``help_text`` calls return (anything but "zh" means English)."""
    global _help_lang
    _help_lang = "zh" if lang == "zh" else "en"


def help_text(key: str) -> str:
    """The command-line help text ``key`` in the language set by ``set_help_lang`` (English until set), as
    written (argparse fills no fields in it)."""
    return catalogue.help_entry(key)[_help_lang]


# Code-owned messages, in ``oomdoctor/catalogue/{en,zh}.yaml`` (group ``core``, then ``shared``), read on
# first use. Rules carry their own texts in rules/*.yaml.
MESSAGES: Mapping[str, Mapping[str, str]] = catalogue.Group("core")
