"""Change top-level keys of a YAML config while every untouched byte stays as the user wrote it.

ruamel.yaml's round-trip loader tells where each key and value sits; the edits are then made on those
lines only. Dumping the whole document through ruamel would also keep comments and key order, but it
rewrites spellings the user chose (``True`` -> ``true``, ``~`` -> empty, list indentation), and those lines
would show up in the diff as if oomdoctor had changed them. A changed key keeps its line and gets an
end-of-line ``# oomdoctor: was <old>``; a removed key leaves a comment line in its place; new keys go at the
end under ``# oomdoctor: <rule id>``. The result is parsed again and compared with what was intended.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

MARK = "oomdoctor"
_QUOTES = "'\""


class EditError(ValueError):
    """The text could not be edited safely (not a block mapping, or a parse problem)."""


@dataclass
class KeyEdit:
    """One top-level key: set to ``value`` (``remove`` False) or delete it (``remove`` True).

    ``note`` is what the end-of-line comment says after ``oomdoctor:``; None means "was <old text>" for a key
    that exists and no comment for a new key.
    """

    key: str
    value: Any = None
    remove: bool = False
    note: str | None = None


@dataclass
class EditResult:
    """An edited YAML text and which keys were appended, changed in place or removed."""

    text: str
    appended: list[str] = field(default_factory=list)
    changed_in_place: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------- rendering


def render_scalar(value: Any, *, quote: str | None = None) -> str:
    """A value as YAML text that PyYAML (and OmegaConf, which LLaMA-Factory uses) reads back unchanged."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, str):
        return _string_text(value, quote)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False)  # JSON is YAML flow style
    return _string_text(str(value), quote)


def _float_text(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "e" in text:  # YAML 1.1 floats need a dot in the mantissa and a signed exponent: 5.0e-05
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        if exponent[0] not in "+-":
            exponent = "+" + exponent
        return f"{mantissa}e{exponent}"
    return text


def _plain_ok(text: str) -> bool:
    if not text or text != text.strip() or "\n" in text:
        return False
    if text[0] in "-?:,[]{}#&*!|>'\"%@`" or ": " in text or " #" in text or text.endswith(":"):
        return False
    if text[0] in "+.0123456789":  # OmegaConf reads more spellings as numbers than PyYAML (5e-05)
        return False
    try:
        return bool(yaml.safe_load(text) == text)
    except yaml.YAMLError:
        return False


def _string_text(text: str, quote: str | None) -> str:
    if quote == "'" and "\n" not in text:
        return "'" + text.replace("'", "''") + "'"
    if quote == '"' or not _plain_ok(text):
        return json.dumps(text, ensure_ascii=False)
    return text


# ------------------------------------------------------------------------------------------- parsing


@dataclass
class _Entry:
    """Where a top-level key and its value sit in the YAML text."""

    key: str
    line: int  # 0-based line of the key
    colon: int  # column of the ':' after the key
    last: int  # last line that belongs to the value (comment and blank lines after it excluded)
    single_line: bool
    value: Any


def _rt_load(text: str) -> Any:
    from ruamel.yaml import YAML

    loader = YAML(typ="rt")
    loader.allow_duplicate_keys = False
    return loader.load(io.StringIO(text))


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _entries(text: str, lines: list[str]) -> list[_Entry]:
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString

    try:
        data = _rt_load(text)
    except Exception as err:  # ruamel raises many error types; all mean "cannot edit this safely"
        raise EditError(" ".join(str(err).split())) from None
    if not isinstance(data, CommentedMap):
        raise EditError("the document is not a mapping")
    if data.fa.flow_style():
        raise EditError("the top-level mapping is written in flow style ({...})")
    positions = [(data.lc.key(k), k) for k in data]
    positions.sort()
    out: list[_Entry] = []
    for index, ((line, col), key) in enumerate(positions):
        next_line = positions[index + 1][0][0] if index + 1 < len(positions) else len(lines)
        if index + 1 < len(positions) and next_line == line:
            raise EditError("two keys share one line")
        text_line = lines[line]
        key_text = str(key)
        start = col + len(key_text) + (2 if text_line[col : col + 1] in _QUOTES else 0)
        colon = text_line.find(":", start)
        if colon < 0:
            raise EditError(f"cannot find the ':' after {key_text!r} on line {line + 1}")
        last = line
        for j in range(next_line - 1, line, -1):
            if _is_content(lines[j]):
                last = j
                break
        value = data[key]
        block_scalar = isinstance(value, LiteralScalarString | FoldedScalarString)
        out.append(_Entry(str(key), line, colon, last, last == line and not block_scalar, value))
    return out


def _split_rest(rest: str) -> tuple[str, str, str | None]:
    """``' 4   # note'`` -> (``'4'``, ``'   '``, ``'note'``): the value text, the gap, the comment (or None)."""
    quote: str | None = None
    i = 0
    while i < len(rest):
        ch = rest[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                if quote == "'" and rest[i + 1 : i + 2] == "'":
                    i += 2
                    continue
                quote = None
        elif ch in _QUOTES and (i == 0 or rest[:i].strip() == "" or rest[i - 1] in "[{, "):
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1] in " \t"):
            before = rest[:i]
            value = before.strip()
            gap = before[len(before.rstrip()) :]
            return value, gap, rest[i + 1 :].strip()
        i += 1
    return rest.strip(), "", None


def _without_marker(comment: str | None) -> str | None:
    """The user's own comment, without an earlier ``oomdoctor: was ...`` (patching a patched config)."""
    if comment is None or not comment.startswith(f"{MARK}:"):
        return comment
    _marker, sep, rest = comment.partition(" | ")
    return rest.strip() or None if sep else None


def _newline_of(lines: list[str]) -> str:
    for line in lines:
        if line.endswith("\r\n"):
            return "\r\n"
        if line.endswith("\n"):
            return "\n"
    return "\n"


def _strip_newline(line: str) -> tuple[str, str]:
    for nl in ("\r\n", "\n", "\r"):
        if line.endswith(nl):
            return line[: -len(nl)], nl
    return line, ""


# ------------------------------------------------------------------------------------------- editing


def apply_edits(text: str, edits: list[KeyEdit], *, rule: str) -> EditResult:
    """The config text with ``edits`` made; raises EditError when the YAML cannot be edited in place."""
    lines = text.splitlines(keepends=True)
    nl = _newline_of(lines)
    entries = {e.key: e for e in _entries(text, lines)}
    result = EditResult(text="")
    replacements: list[tuple[int, int, list[str]]] = []  # (first line, last line, new lines)
    appended: list[str] = []
    for edit in edits:
        entry = entries.get(edit.key)
        if entry is None:
            if not edit.remove:
                appended.append(_new_key_line(edit, nl))
                result.appended.append(edit.key)
            continue
        replacements.append((entry.line, entry.last, [_edited_line(lines, entry, edit, nl)]))
        (result.removed if edit.remove else result.changed_in_place).append(edit.key)
    for first, last, new_lines in sorted(replacements, reverse=True):
        lines[first : last + 1] = new_lines
    _append_keys(lines, appended, rule, nl)
    result.text = "".join(lines)
    _check(text, result.text, edits)
    return result


def _new_key_line(edit: KeyEdit, nl: str) -> str:
    """A key the config does not have, as a line of its own (with the edit's note as a comment)."""
    note_text = f"  # {MARK}: {edit.note}" if edit.note else ""
    return f"{edit.key}: {render_scalar(edit.value)}{note_text}{nl}"


def _edited_line(lines: list[str], entry: _Entry, edit: KeyEdit, nl: str) -> str:
    """The line that replaces ``entry``'s lines: the key with its new value and a comment saying what it was
    (the user's own comment kept), or, for a removal, a comment saying what was removed."""
    head = lines[entry.line][: entry.colon + 1]
    body, line_nl = _strip_newline(lines[entry.line])
    line_nl = line_nl or nl
    old_text, gap, comment = _split_rest(body[entry.colon + 1 :]) if entry.single_line else ("", "", None)
    if not entry.single_line:
        old_text = render_scalar(_plain(entry.value))
    if edit.remove:
        note = edit.note or f"removed {edit.key}: {old_text}"
        return f"# {MARK}: {note}{line_nl}"
    quote = (
        old_text[0] if entry.single_line and old_text[:1] in _QUOTES and isinstance(edit.value, str) else None
    )
    rendered = render_scalar(edit.value, quote=quote)
    note = edit.note or f"was {old_text if old_text else 'empty'}"
    comment = _without_marker(comment)
    marker = f"# {MARK}: {note}" + (f" | {comment}" if comment else "")
    return f"{head} {rendered}{gap or '  '}{marker}{line_nl}"


def _append_keys(lines: list[str], appended: list[str], rule: str, nl: str) -> None:
    """New keys go at the end, after a blank line and a comment naming the rule that added them."""
    if not appended:
        return
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += nl
    if lines and lines[-1].strip():
        lines.append(nl)
    lines.append(f"# {MARK}: {rule}{nl}")
    lines.extend(appended)


def _plain(value: Any) -> Any:
    """ruamel's round-trip containers and scalars as plain Python values (for rendering an old value)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def _check(before: str, after: str, edits: list[KeyEdit]) -> None:
    """The edited text must parse to exactly the intended mapping; anything else is a bug, not a config."""
    expected = dict(yaml.safe_load(before) or {})
    for edit in edits:
        if edit.remove:
            expected.pop(edit.key, None)
        else:
            expected[edit.key] = edit.value
    got = yaml.safe_load(after)
    if got != expected:
        raise EditError("the edited config does not read back as intended")
