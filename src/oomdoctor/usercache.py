"""oomdoctor's user cache (``$XDG_CACHE_HOME/oomdoctor``, ``~/.cache/oomdoctor`` when unset): derived data
that is slow to build and cheap to rebuild, kept as ``marshal`` entries keyed by a hash of what they were built
from. marshal is built into the interpreter (no import, no json on a ``--help`` start) and reads an entry
two to three times faster than json; its format can change between Python versions, so the key holds the
interpreter's (``sys.implementation.cache_tag``) and marshal's version.

An entry that is missing, unreadable or damaged is a miss, never an error; one that cannot be written is
simply not kept. Nothing here is the user's: any entry may be deleted at any time. Each kind's folder is
pruned when an entry is written (a miss): the newest ``KEEP_PER_KIND`` entries stay, and entries of the
JSON format that earlier versions wrote go.
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from oomdoctor import __version__

if TYPE_CHECKING:
    from pathlib import Path

# Entries kept per kind. Most kinds hold one live entry per bundled file (the tables, the rules, the
# catalogue); the parsed configs hold one per config text read. An entry pruned too early costs one start
# the few milliseconds of rebuilding it, so the bound is generous and by age of writing alone.
KEEP_PER_KIND = 64
_SUFFIX = ".marshal"
CALIBRATIONS = "calibration"  # the folder of the trials' calibrations (estimate/calibrate.py), not entries
_TMP = ".tmp-"  # an entry being written (pruning leaves it alone)
_OLD_SUFFIX = ".json"  # the format before marshal: never read again, removed on the kind's next write
_FORMAT = f"{sys.implementation.cache_tag} marshal {marshal.version}"


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    from pathlib import Path  # not on a start that reads only marshal entries (``--help``)

    return Path(_cache_dir(environ))


def any_file(folder: str, suffix: str) -> bool:
    """Whether the cache's ``folder`` holds a file named ``*suffix``: a look before importing what reads them."""
    try:
        with os.scandir(os.path.join(_cache_dir(), folder)) as it:
            return any(e.name.endswith(suffix) for e in it)
    except OSError:
        return False


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
    for chunk in (f"oomdoctor {__version__} {_FORMAT} {kind}\0".encode(), *_framed(parts)):
        crc, adler, size = zlib.crc32(chunk, crc), zlib.adler32(chunk, adler), size + len(chunk)
    return f"{crc:08x}{adler:08x}{size:x}"


def _framed(parts: Iterable[tuple[str, bytes]]) -> Iterable[bytes]:
    for name, data in parts:
        yield f"{name}\0{len(data)}\0".encode()
        yield data


def _entry(kind: str, key: str) -> str:
    return os.path.join(_cache_dir(), kind, key + _SUFFIX)  # os.path: pathlib costs --help milliseconds


def read(kind: str, key: str) -> Any | None:
    """The entry's payload, or None on a miss (or a damaged entry)."""
    try:
        with open(_entry(kind, key), "rb") as f:
            stored = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError, MemoryError):  # MemoryError: a damaged length field
        return None
    if not isinstance(stored, tuple) or len(stored) != 2 or stored[0] != key:
        return None
    return stored[1]


def write(kind: str, key: str, payload: Any) -> bool:
    """Keep ``payload`` (of the types marshal holds: None, bool, int, float, str, bytes, tuple, list, dict,
    set) under ``key``, atomically; False when it cannot be kept. Prunes the kind's folder."""
    try:
        data = marshal.dumps((key, payload))
    except ValueError:  # a type marshal does not hold (a date, an object)
        return False
    path = _entry(kind, key)
    if not _write_bytes(path, data):
        return False
    _prune(os.path.dirname(path), keep=path)
    return True


def _prune(folder: str, *, keep: str) -> None:
    """Remove the old-format entries and all but the newest ``KEEP_PER_KIND`` entries (never ``keep``)."""
    try:
        with os.scandir(folder) as it:
            files = [e for e in it if e.is_file(follow_symlinks=False)]
    except OSError:
        return
    old = [e.path for e in files if e.name.endswith(_OLD_SUFFIX) and not e.name.startswith(_TMP)]
    entries = sorted(
        (e for e in files if e.name.endswith(_SUFFIX) and not e.name.startswith(_TMP) and e.path != keep),
        key=_written_ns,
        reverse=True,
    )
    import contextlib  # only on a miss

    for path in old + [e.path for e in entries[KEEP_PER_KIND - 1 :]]:
        with contextlib.suppress(OSError):  # another process pruned it, or the folder is read-only
            os.unlink(path)


def _write_bytes(path: str | Path, data: bytes) -> bool:
    """``data`` as the file ``path``, atomically (a reader sees the old file or the new one); False when it
    cannot be written."""
    folder, suffix = os.path.dirname(path), os.path.splitext(path)[1]
    try:
        import tempfile  # only on a miss

        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TMP, suffix=suffix, dir=folder)
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


def _written_ns(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat(follow_symlinks=False).st_mtime_ns
    except OSError:  # pruned meanwhile by another process
        return 0


def kept(kind: str, parts: Iterable[tuple[str, bytes]], build: Callable[[], Any]) -> Any:
    """What ``build()`` gives for these named contents: read back from the entry kept for them, else built
    now and kept when it comes back from marshal equal (a date or an object cannot be kept, nor a NaN,
    which equals nothing: such a value is built every time). ``build`` raising keeps nothing."""
    key = content_key(kind, parts)
    cached = read(kind, key)
    if isinstance(cached, tuple) and len(cached) == 1:
        return cached[0]
    value = build()
    if _survives(value):
        write(kind, key, (value,))
    return value


Strings = dict[str, dict[str, str]]


def kept_strings(kind: str, parts: Iterable[tuple[str, bytes]], build: Callable[[], Strings]) -> Strings:
    """``kept`` for a table of texts (``name -> {field: text}``), checked to be one when read back: the
    ``--help`` texts."""
    value = kept(kind, parts, build)
    return value if _strings(value) else build()


def _strings(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, dict) and all(isinstance(s, str) for s in (*v, *v.values()))
        for k, v in value.items()
    )


def _survives(value: Any) -> bool:
    """Only what comes back equal is kept."""
    try:
        return bool(marshal.loads(marshal.dumps(value)) == value)
    except ValueError:
        return False
