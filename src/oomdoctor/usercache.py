"""oomdoctor's user cache (``$XDG_CACHE_HOME/oomdoctor``, ``~/.cache/oomdoctor`` when unset): derived data
that is slow to build and cheap to rebuild, as JSON entries keyed by a hash of what they were built from
(``kept_strings``: marshal entries, for a start that must not import json, the ``--help`` texts).

An entry that is missing, unreadable or damaged is a miss, never an error; one that cannot be written is
simply not kept. Nothing here is the user's: any entry may be deleted at any time.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from oomdoctor import __version__

if TYPE_CHECKING:
    from pathlib import Path


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    from pathlib import Path  # not on a start that reads only marshal entries (``--help``)

    return Path(_cache_dir(environ))


def _cache_dir(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "oomdoctor")


def content_key(kind: str, parts: Iterable[tuple[str, bytes]]) -> str:
    """A key for an entry built from these named contents by this version of oomdoctor.

    Two independent 32-bit checksums and the total length: these are our own small files, not an adversary's,
    and zlib is already loaded where importing hashlib (OpenSSL) would cost a start milliseconds.
    """
    crc, adler, size = 0, 1, 0
    for chunk in (f"oomdoctor {__version__} {kind}\0".encode(), *_framed(parts)):
        crc, adler, size = zlib.crc32(chunk, crc), zlib.adler32(chunk, adler), size + len(chunk)
    return f"{crc:08x}{adler:08x}{size:x}"


def _framed(parts: Iterable[tuple[str, bytes]]) -> Iterable[bytes]:
    for name, data in parts:
        yield f"{name}\0{len(data)}\0".encode()
        yield data


def _entry(kind: str, key: str) -> Path:
    return cache_root() / kind / f"{key}.json"


def read(kind: str, key: str) -> Any | None:
    """The entry's payload, or None on a miss (or a damaged entry)."""
    import json  # not on a start that reads only marshal entries (``--help``)

    try:
        data = json.loads(_entry(kind, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    return data.get("payload")


def write(kind: str, key: str, payload: Any) -> bool:
    """Keep ``payload`` (JSON-able) under ``key``, atomically; False when it cannot be kept."""
    import json

    try:
        text = json.dumps({"key": key, "payload": payload}, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return False
    return _write_bytes(_entry(kind, key), text.encode("utf-8"))


def _write_bytes(path: str | Path, data: bytes) -> bool:
    """``data`` as the file ``path``, atomically (a reader sees the old file or the new one); False when it
    cannot be written."""
    folder, suffix = os.path.dirname(path), os.path.splitext(path)[1]
    try:
        import tempfile  # only on a miss

        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    return True


def kept_json(kind: str, parts: Iterable[tuple[str, bytes]], build: Callable[[], Any]) -> Any:
    """What ``build()`` gives for these named contents: read back from the entry kept for them, else built
    now and kept when it comes back from JSON unchanged (a date, a set or a NaN would not: such a value is
    built every time). A mapping with keys other than strings (``2: offload_optimizer``) is kept as its
    items. ``build`` raising keeps nothing."""
    key = content_key(kind, parts)
    cached = read(kind, key)
    if isinstance(cached, dict) and "data" in cached:
        return _from_json(cached["data"]) if cached.get("items") else cached["data"]
    value = build()
    encoded = _to_json(value)
    if _survives_json(encoded, value):
        write(kind, key, {"items": encoded != value, "data": encoded})
    return value


Strings = dict[str, dict[str, str]]


def kept_strings(kind: str, parts: Iterable[tuple[str, bytes]], build: Callable[[], Strings]) -> Strings:
    """``kept_json`` for a table of texts (``name -> {field: text}``), kept with ``marshal`` (built into the
    interpreter, already loaded): for the ``--help`` texts, on a start that imports no json."""
    import marshal

    key = content_key(kind, parts)
    path = os.path.join(_cache_dir(), kind, f"{key}.marshal")  # os.path: pathlib costs --help milliseconds
    try:
        with open(path, "rb") as f:
            stored = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        stored = None
    if isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key and _strings(stored[1]):
        kept: Strings = stored[1]
        return kept
    value = build()
    _write_bytes(path, marshal.dumps((key, value)))
    return value


def _strings(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, dict) and all(isinstance(s, str) for s in (*v, *v.values()))
        for k, v in value.items()
    )


# JSON keys are strings; a mapping with other keys is kept as its items under this key.
_ITEMS = "\u0000items"


def _to_json(value: Any) -> Any:
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _to_json(v) for k, v in value.items()}
        return {_ITEMS: [[k, _to_json(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if _ITEMS in value:
            return {k: _from_json(v) for k, v in value[_ITEMS]}
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _survives_json(encoded: Any, value: Any) -> bool:
    """Only what comes back unchanged is kept."""
    import json

    try:
        return bool(_from_json(json.loads(json.dumps(encoded))) == value)
    except (TypeError, ValueError):
        return False
