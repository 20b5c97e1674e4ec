"""The one catalogue of code-owned texts: ``en.yaml`` and ``zh.yaml`` beside this file, the same keys in each.

Three groups: ``shared`` (texts the command line and the app both show), ``core`` (``i18n.msg`` /
``i18n.both``) and ``tui`` (``tui.strings.t``). A key is looked up in its own group first, then in
``shared``. Rule texts are not here: they live with their rules in ``rules/*.yaml``.

Nothing is read at import. The first lookup reads the two files' bytes and takes the compiled form from the
user cache (JSON, keyed by the files' contents and this module's code, see ``usercache``); only a miss (a
first start, an edited file) parses the YAML and writes the entry again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from pathlib import Path

KIND = "catalogue-v1"
HELP_KIND = "catalogue-help-v1"  # the --help texts alone, kept with marshal (no json on `oomdoctor --help`)
HELP_PREFIX = "core.help_"
LANGS = ("en", "zh")
GROUPS = ("shared", "core", "tui")
SHARED = "shared"
# Only os at import: pathlib, json and the cache come with the first lookup (a start that prints --help makes none).
HERE = os.path.dirname(os.path.abspath(__file__))

Entry = Mapping[str, str]  # {"en": ..., "zh": ...}
Flat = dict[str, str]  # "group.key" -> the text in one language

_texts: dict[str, dict[str, str]] | None = None
_help: dict[str, dict[str, str]] | None = None


def texts() -> dict[str, dict[str, str]]:
    """Every entry, ``"group.key" -> {"en": ..., "zh": ...}``, loaded on the first call."""
    global _texts
    if _texts is None:
        _texts = _load()
    return _texts


def lookup(group: str, key: str) -> dict[str, str] | None:
    """The entry ``key`` of ``group`` (or of ``shared``), None when there is none."""
    table = texts()
    return table.get(f"{group}.{key}") or table.get(f"{SHARED}.{key}")


def help_entry(key: str) -> dict[str, str]:
    """The command-line help text ``key`` (a ``core`` key starting ``help_``), ``{"en", "zh"}``. A start that
    prints ``--help`` reads only these, from their own cache entry, which needs no json."""
    global _help
    if _help is None:
        _help = _load_help()
    return _help[key]


def group_keys(group: str) -> list[str]:
    """The keys ``group`` answers: its own and the shared ones, without the group prefix."""
    own = [k.partition(".")[2] for k in texts() if k.startswith(f"{group}.")]
    seen = set(own)
    return own + [
        k.partition(".")[2] for k in texts() if k.startswith(f"{SHARED}.") and k.partition(".")[2] not in seen
    ]


class Group(Mapping[str, Entry]):
    """One group as a read-only mapping ``key -> {"en", "zh"}`` (``key in TEXTS``, ``MESSAGES[key]``),
    reading the catalogue only when first asked."""

    def __init__(self, group: str) -> None:
        self.group = group

    def __getitem__(self, key: str) -> Entry:
        entry = lookup(self.group, key)
        if entry is None:
            raise KeyError(key)
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(group_keys(self.group))

    def __len__(self) -> int:
        return len(group_keys(self.group))


# --- reading the files ---------------------------------------------------------------------------------


def files() -> dict[str, Path]:
    from pathlib import Path

    return {lang: Path(HERE) / f"{lang}.yaml" for lang in LANGS}


def _load() -> dict[str, dict[str, str]]:
    from pathlib import Path

    from oomdoctor import usercache

    raw = {lang: path.read_bytes() for lang, path in files().items()}
    parts = [*sorted(raw.items()), ("code", Path(__file__).read_bytes())]

    def build() -> dict[str, dict[str, str]]:
        return merge(
            {lang: flatten(parse(data, f"{lang}.yaml"), f"{lang}.yaml") for lang, data in raw.items()}
        )

    kept = usercache.kept(KIND, parts, build)
    return kept if _well_formed(kept) else build()  # an entry damaged or edited by hand: built afresh


def _load_help() -> dict[str, dict[str, str]]:
    from oomdoctor import usercache

    def build() -> dict[str, dict[str, str]]:
        prefix = HELP_PREFIX.partition(".")[0] + "."
        return {k.removeprefix(prefix): v for k, v in texts().items() if k.startswith(HELP_PREFIX)}

    return usercache.kept_strings(HELP_KIND, _parts(), build)


def _parts() -> list[tuple[str, bytes]]:
    """What a compiled form is keyed by: both files' bytes and this module's code (read with os alone)."""
    return [(name, _read(path)) for name, path in (*_FILES, ("code", __file__))]


_FILES = tuple(sorted((lang, os.path.join(HERE, f"{lang}.yaml")) for lang in LANGS))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _well_formed(payload: Any) -> TypeGuard[dict[str, dict[str, str]]]:
    return isinstance(payload, dict) and all(
        isinstance(v, dict) and set(v) == set(LANGS) and all(isinstance(s, str) for s in v.values())
        for v in payload.values()
    )


def parse(data: bytes, name: str) -> Any:
    from oomdoctor.datafiles import load_yaml_text  # PyYAML only on a cache miss

    try:
        return load_yaml_text(data.decode("utf-8"))
    except Exception as err:  # not UTF-8, or PyYAML's YAMLError: a broken bundled file
        raise ValueError(f"catalogue {name}: not UTF-8 YAML ({err})") from None


def flatten(tree: Any, name: str) -> Flat:
    """``{group: {key: text}}`` as ``{"group.key": text}``; a wrong shape is a ValueError naming the file."""
    if not isinstance(tree, dict) or set(tree) - set(GROUPS):
        raise ValueError(f"catalogue {name}: the top level holds the groups {', '.join(GROUPS)}")
    out: Flat = {}
    for group, items in tree.items():
        if not isinstance(items, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in items.items()
        ):
            raise ValueError(f"catalogue {name}: group {group!r} maps each key to one text")
        out.update({f"{group}.{k}": v for k, v in items.items()})
    return out


def merge(flat: Mapping[str, Flat]) -> dict[str, dict[str, str]]:
    """One entry per key; a text missing in one language falls back to the other (``check`` reports it)."""
    keys = list(dict.fromkeys(k for lang in LANGS for k in flat.get(lang, {})))
    return {k: {lang: flat.get(lang, {}).get(k) or _other(flat, k, lang) for lang in LANGS} for k in keys}


def _other(flat: Mapping[str, Flat], key: str, lang: str) -> str:
    return next((flat[o][key] for o in LANGS if o != lang and key in flat.get(o, {})), "")


# --- the completeness check (tests/unit/test_catalogue.py) ---------------------------------------------


def fields(text: str) -> set[str]:
    """The names a text fills (``{path}``, ``{mib:,.0f}`` -> path, mib), the same in either language (a field
    that differs by language is passed as a ``Text``, filled in each message's own language)."""
    import string  # only the check needs it

    names = {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(text) if name}
    return names


def check(flat: Mapping[str, Flat]) -> list[str]:
    """Every problem of a catalogue (``{lang: {"group.key": text}}``): a key in one language only, a text
    that is empty, fields that differ between the languages, a key both in a group and in ``shared``."""
    problems: list[str] = []
    en, zh = flat.get("en", {}), flat.get("zh", {})
    problems += [f"{k}: no zh text" for k in en if k not in zh]
    problems += [f"{k}: no en text" for k in zh if k not in en]
    for lang, table in (("en", en), ("zh", zh)):
        problems += [f"{k}: empty {lang} text" for k, text in table.items() if not text.strip()]
    for k in en.keys() & zh.keys():
        if fields(en[k]) != fields(zh[k]):
            problems.append(f"{k}: en fills {sorted(fields(en[k]))}, zh {sorted(fields(zh[k]))}")
    bare_shared = {k.partition(".")[2] for k in en if k.startswith(f"{SHARED}.")}
    problems += [
        f"{k}: also in shared" for k in en if not k.startswith(SHARED) and k.partition(".")[2] in bare_shared
    ]
    return sorted(problems)


def read_flat() -> dict[str, Flat]:
    """The two files as they are now, flattened (no cache): what the check reads."""
    return {lang: flatten(parse(path.read_bytes(), path.name), path.name) for lang, path in files().items()}
