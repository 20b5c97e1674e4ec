"""The one input layer: every file oomdoctor reads from the user passes through here.

A user's folder may hold anything: a FIFO where a config should be, a 1.5 GB sparse file named
``config.json``, a YAML alias bomb, JSON nested 100,000 deep, a batch size of 320 digits. Each reader here
refuses such input at once, before it costs time or memory, with ``BadInput`` naming the file, the key or
line, and why:

- only regular files are opened (``stat`` first; opened ``O_NONBLOCK`` so a FIFO swapped in after the
  check never blocks, then ``fstat`` again);
- the size from ``stat`` is checked against a bound per kind before anything is read (sparse files too);
- YAML: the node graph is walked before anything is built, so aliases cannot expand past a node budget and
  nesting cannot pass a depth bound; numbers Python refuses (over 4,300 digits) become ``BadInput``;
- JSON: a depth bound, no ``NaN``/``Infinity``, no number too big for a float;
- CSV: streamed line by line with a line-length bound and a row budget;
- values: typed, range-checked converters (``as_int``, ``as_number``, ``as_text``...).

Logs are read by ``facts.log`` from their end; they do not pass here.
"""

from __future__ import annotations

import io
import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomdoctor.errors import BadInput, one_line
from oomdoctor.i18n import both, msg
from oomdoctor.report import units

if TYPE_CHECKING:
    import yaml

    from oomdoctor.text import Text

MIB = 1024 * 1024
# What a file of each kind can reasonably weigh. A LLaMA-Factory config is a few KiB, a DeepSpeed JSON or a
# model config.json a few KiB, result.json and change.json a few KiB; anything past these is not one.
MAX_BYTES = {
    "config": 4 * MIB,
    "json": 4 * MIB,
    "lengths": 1 * MIB,
    "csv": 32 * MIB,  # 500,000 sample rows of ~60 bytes
}
MAX_DEPTH = 64  # nesting of YAML/JSON containers; real configs use 3 or 4
MAX_NODES = 200_000  # YAML nodes after alias expansion; a config has a few hundred
MAX_CSV_LINE = 4096  # bytes per gpu-samples.csv line (six short numbers)
MAX_CSV_ROWS = 500_000  # 28 hours of 200 ms samples on one GPU, 3.5 on eight; a trial is minutes
MAX_INT = 10**15  # the largest integer any setting we read can sensibly hold
MAX_NUMBER = 1e18
_SNIFF_BYTES = 8192

# The catalogue key of a file kind's name in an error, by the English name callers pass as ``what``; a name
# not here (a file name: result.json, gpu-samples.csv) reads the same in both languages.
_WHAT_KEYS = {
    "config": "what_config",
    "DeepSpeed config": "what_deepspeed_config",
    "lengths file": "what_lengths_file",
    "model config.json": "what_model_config",
}


def what_label(what: str) -> Text | str:
    """The name of a file kind, in both languages where they differ (``Text``), else as given."""
    key = _WHAT_KEYS.get(what)
    return both(key) if key else what


# ------------------------------------------------------------------------------------------- files


def stat_regular(path: str | os.PathLike[str], *, what: str = "file") -> os.stat_result:
    """``os.stat`` of a regular file; BadInput for a missing path, a folder, a FIFO, a device, a socket."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise BadInput(msg("file_missing", None, what=what_label(what), path=one_line(p))) from None
    except OSError as err:
        raise BadInput(msg("file_unreadable", None, path=one_line(p), detail=err.strerror or err)) from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(p, st.st_mode)
    return st


def _kind_of(mode: int) -> str:
    """The catalogue key naming what a path that is no regular file is."""
    if stat.S_ISDIR(mode):
        return "kind_folder"
    if stat.S_ISFIFO(mode):
        return "kind_fifo"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "kind_device"
    if stat.S_ISSOCK(mode):
        return "kind_socket"
    return "kind_special"


def _not_regular(p: Path, mode: int) -> BadInput:
    return BadInput(msg("in_not_regular", None, path=one_line(p), kind=both(_kind_of(mode))))


def _check_size(p: Path, size: int, max_bytes: int, what: str) -> None:
    if size > max_bytes:
        raise BadInput(
            msg("in_too_big", None, path=one_line(p), what=what, size=_mib(size), limit=_mib(max_bytes))
        )


def _mib(n: int) -> str:
    return units.mib(n / MIB, digits=1)


def open_regular(path: str | os.PathLike[str], *, what: str, max_bytes: int) -> io.BufferedReader:
    """The file opened for binary reading, after the checks: regular, at most ``max_bytes``."""
    p = Path(path)
    st = stat_regular(p, what=what)
    _check_size(p, st.st_size, max_bytes, what)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise BadInput(msg("file_unreadable", None, path=one_line(p), detail=err.strerror or err)) from None
    try:
        st = os.fstat(fd)  # the path may have been swapped for a FIFO between stat and open
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(p, st.st_mode)
        _check_size(p, st.st_size, max_bytes, what)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str], *, what: str, max_bytes: int) -> bytes:
    """The whole file, bounded: never more than ``max_bytes`` are read, even if it grows meanwhile."""
    p = Path(path)
    with open_regular(p, what=what, max_bytes=max_bytes) as f:
        try:
            data = f.read(max_bytes + 1)
        except OSError as err:
            raise BadInput(
                msg("file_unreadable", None, path=one_line(p), detail=err.strerror or err)
            ) from None
    _check_size(p, len(data), max_bytes, what)
    return data


def read_text(path: str | os.PathLike[str], *, what: str, max_bytes: int) -> str:
    """The file as UTF-8 text (a BOM allowed); BadInput for binary or non-UTF-8 content."""
    p = Path(path)
    data = read_bytes(p, what=what, max_bytes=max_bytes)
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise BadInput(msg("in_binary", None, path=one_line(p), what=what))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise BadInput(msg("in_not_utf8", None, path=one_line(p), what=what, offset=err.start)) from None


# -------------------------------------------------------------------------------------------- YAML


def _yaml_loader() -> type[yaml.SafeLoader]:
    """The safe loader, in C when PyYAML was built with libyaml (imported here: off the start-up path)."""
    import yaml

    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return loader


def yaml_error_line(err: yaml.YAMLError) -> str:
    """PyYAML errors span several lines; the user gets one: "line 3, column 5: <problem>"."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    mark = getattr(err, "problem_mark", None)
    if mark is not None:
        return one_line(f"line {mark.line + 1}, column {mark.column + 1}: {problem}")
    return one_line(" ".join(str(problem).split()))


def check_yaml_graph(node: yaml.Node, *, path: str) -> None:
    """Walk the composed node graph as the constructor would expand it (aliases followed), without
    recursion: BadInput past ``MAX_NODES`` expanded nodes, ``MAX_DEPTH`` levels, or a node inside itself."""
    expanded: dict[int, int] = {}  # id(node) -> expanded size, once known
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(node, 1, False)]
    while stack:
        current, depth, done = stack.pop()
        key = id(current)
        children = _children(current)
        if done:
            on_path.discard(key)
            size = 1 + sum(expanded[id(c)] for c in children)
            expanded[key] = size
            if size > MAX_NODES:
                raise BadInput(
                    msg(
                        "in_yaml_expands",
                        None,
                        path=path,
                        line=current.start_mark.line + 1,
                        limit=units.number(MAX_NODES),
                    )
                )
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise BadInput(msg("in_yaml_recursive", None, path=path, line=current.start_mark.line + 1))
        if depth > MAX_DEPTH:
            raise BadInput(
                msg(
                    "in_too_deep",
                    None,
                    path=path,
                    where=f"line {current.start_mark.line + 1}",
                    limit=MAX_DEPTH,
                )
            )
        on_path.add(key)
        stack.append((current, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in expanded)


def _children(node: yaml.Node) -> list[yaml.Node]:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml(text: str, *, path: str) -> Any:
    """The YAML document as plain data (PyYAML's safe constructors), with alias expansion, depth and
    numbers bounded. BadInput for malformed YAML, more than one document, or a refused value."""
    import yaml

    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_yaml_graph(node, path=path)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise BadInput(msg("yaml_malformed", None, path=path, detail=yaml_error_line(err))) from None
    except (ValueError, OverflowError, RecursionError) as err:
        # int() of a 5,000-digit scalar, a timestamp out of range, ...
        raise BadInput(
            msg("in_bad_yaml_value", None, path=path, detail=one_line(str(err).split("\n")[0][:200]))
        ) from None
    finally:
        loader.dispose()


def read_yaml_mapping(path: str | os.PathLike[str], *, what: str = "config") -> dict[str, Any]:
    """A YAML file that must hold a mapping (a config); keys become strings."""
    p = Path(path)
    text = read_text(p, what=what, max_bytes=MAX_BYTES["config"])
    raw = load_yaml(text, path=one_line(p))
    if raw is None:
        raise BadInput(msg("config_empty", None, path=one_line(p)))
    if not isinstance(raw, dict):
        raise BadInput(msg("yaml_not_mapping", None, path=one_line(p)))
    return {str(k): v for k, v in raw.items()}


# -------------------------------------------------------------------------------------------- JSON


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number too big for a float: {text[:40]}")
    return value


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def json_depth_ok(value: Any, *, path: str) -> None:
    """BadInput when containers nest deeper than ``MAX_DEPTH`` (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            items: Any = current.values()
        elif isinstance(current, list):
            items = current
        else:
            continue
        if depth > MAX_DEPTH:
            raise BadInput(msg("in_too_deep", None, path=path, where="JSON", limit=MAX_DEPTH))
        stack.extend((v, depth + 1) for v in items)


def load_json(text: str, *, path: str) -> Any:
    """JSON text parsed with a depth bound, no NaN/Infinity, no float overflow, no 4,300-digit integers."""
    try:
        value = json.loads(text, parse_float=_finite_float, parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        raise BadInput(
            msg("in_bad_json", None, path=path, detail=f"line {err.lineno}, column {err.colno}: {err.msg}")
        ) from None
    except RecursionError:
        raise BadInput(msg("in_too_deep", None, path=path, where="JSON", limit=MAX_DEPTH)) from None
    except ValueError as err:
        raise BadInput(
            msg("in_bad_json", None, path=path, detail=one_line(str(err).split("\n")[0][:200]))
        ) from None
    json_depth_ok(value, path=path)
    return value


def read_json(path: str | os.PathLike[str], *, what: str, max_bytes: int | None = None) -> Any:
    p = Path(path)
    text = read_text(p, what=what, max_bytes=max_bytes or MAX_BYTES["json"])
    return load_json(text, path=one_line(p))


def read_json_object(
    path: str | os.PathLike[str], *, what: str, max_bytes: int | None = None
) -> dict[str, Any]:
    """A JSON file that must hold an object."""
    value = read_json(path, what=what, max_bytes=max_bytes)
    if not isinstance(value, dict):
        raise BadInput(
            msg(
                "in_bad_type",
                None,
                path=one_line(path),
                key="(top level)",
                expected="a JSON object",
                got=_type_name(value),
            )
        )
    return value


# --------------------------------------------------------------------------------------------- CSV


def iter_csv_rows(
    path: str | os.PathLike[str],
    *,
    what: str,
    max_bytes: int | None = None,
    max_rows: int = MAX_CSV_ROWS,
    max_line: int = MAX_CSV_LINE,
) -> Iterator[list[str]]:
    """The rows of a CSV file, its header first, streamed through one ``csv.reader``: BadInput for a line
    over ``max_line`` bytes, more than ``max_rows`` rows after the header, or text that is not UTF-8.
    Nothing is held but the current line."""
    import csv  # only a CSV reader needs it

    p = Path(path)
    with open_regular(p, what=what, max_bytes=max_bytes or MAX_BYTES["csv"]) as f:
        reader = csv.reader(_bounded_lines(f, p, max_line))
        number = 0
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as err:  # a lone \r inside a field, ...
                raise BadInput(
                    msg("in_bad_csv", None, path=one_line(p), line=reader.line_num, detail=one_line(err))
                ) from None
            if number > max_rows:
                raise BadInput(msg("in_too_many_rows", None, path=one_line(p), limit=units.number(max_rows)))
            number += 1
            yield row


def _bounded_lines(f: io.BufferedReader, p: Path, max_line: int) -> Iterator[str]:
    number = 0
    while True:
        raw = f.readline(max_line + 1)
        if not raw:
            return
        number += 1
        if len(raw) > max_line:
            raise BadInput(
                msg("in_line_too_long", None, path=one_line(p), line=number, limit=units.number(max_line))
            )
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput(
                msg("in_not_utf8", None, path=one_line(p), what=p.name, offset=f"line {number}")
            ) from None


# ------------------------------------------------------------------------------------------ values


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for a message: one line, at most ``limit`` characters, and safe for an integer of
    any size (``repr`` of a 5,000-digit int raises)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of about {units.number(int(value.bit_length() * 0.30103))} digits>"
    if isinstance(value, dict | list | tuple) and len(value) > 8:
        return f"<{type(value).__name__} of {units.number(len(value))} items>"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Shown:
    """A value put into a message with ``{value!r}``: its ``short_repr``."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return short_repr(self.value)

    __str__ = __repr__


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return f"text {short_repr(value)}"
    return f"{type(value).__name__} {short_repr(value)}"


def bad_value(path: str, key: str, expected: str, value: Any) -> BadInput:
    return BadInput(
        msg(
            "in_bad_type",
            None,
            path=one_line(path),
            key=one_line(key),
            expected=expected,
            got=_type_name(value),
        )
    )


def as_int(
    value: Any, *, path: str, key: str, low: int = 0, high: int = MAX_INT, strict: bool = False
) -> int:
    """An integer in ``[low, high]``: an int, an integral float, or a string of one (the WebUI writes "4");
    only an int with ``strict`` (files we wrote ourselves as JSON)."""
    number: int | None = None
    if isinstance(value, bool) or (strict and not isinstance(value, int)):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and len(value.strip()) <= 40:
        text = value.strip()
        try:
            number = int(text)
        except ValueError:
            try:
                as_float = float(text)
            except ValueError:
                as_float = math.nan
            number = int(as_float) if math.isfinite(as_float) and as_float.is_integer() else None
    if number is None or not low <= number <= high:
        raise bad_value(path, key, f"a whole number from {units.number(low)} to {units.number(high)}", value)
    return number


def as_number(
    value: Any, *, path: str, key: str, low: float = -MAX_NUMBER, high: float = MAX_NUMBER
) -> float:
    """A finite number in ``[low, high]`` (an int, a float, or a string of one)."""
    number: float | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = float(value) if abs(value) <= 10**308 else None
    elif isinstance(value, float):
        number = value
    elif isinstance(value, str) and len(value.strip()) <= 40:
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or not low <= number <= high:
        raise bad_value(path, key, f"a number from {low:g} to {high:g}", value)
    return number


def optional_int(
    mapping: dict[str, Any], key: str, *, path: str, low: int = 0, high: int = MAX_INT, strict: bool = True
) -> int | None:
    value = mapping.get(key)
    return None if value is None else as_int(value, path=path, key=key, low=low, high=high, strict=strict)


def optional_number(
    mapping: dict[str, Any], key: str, *, path: str, low: float = -MAX_NUMBER, high: float = MAX_NUMBER
) -> float | None:
    value = mapping.get(key)
    return None if value is None else as_number(value, path=path, key=key, low=low, high=high)


def optional_text(mapping: dict[str, Any], key: str, *, path: str, max_len: int = 4096) -> str | None:
    value = mapping.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_len:
        raise bad_value(path, key, "a string", value)
    return value


def optional_mapping(mapping: dict[str, Any], key: str, *, path: str) -> dict[str, Any] | None:
    value = mapping.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_value(path, key, "a mapping", value)
    return value


def optional_list(mapping: dict[str, Any], key: str, *, path: str) -> list[Any] | None:
    value = mapping.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise bad_value(path, key, "a list", value)
    return value


# ----------------------------------------------------------------------------------- output folders

SYSTEM_ROOTS = ("/proc", "/sys", "/dev")


def check_new_folder(out: str | os.PathLike[str], *, protected: dict[str, Path] | None = None) -> Path:
    """Where a new folder may be created for ``--out``: its absolute path (the parent resolved, the last part
    kept as given), after refusing a path that exists (a symlink too, dangling or not), lies under /proc, /sys
    or /dev, or inside one of the ``protected`` folders of the user's run (``{"output_dir": path, ...}``)."""
    given = Path(out).expanduser()
    shown = one_line(given)
    if os.path.islink(given):
        raise BadInput(msg("out_is_symlink", None, path=shown))
    if os.path.lexists(given):
        raise BadInput(msg("out_exists", None, path=shown))
    absolute = Path(os.path.abspath(given))
    target = absolute.parent.resolve() / absolute.name
    for root in SYSTEM_ROOTS:
        if target.is_relative_to(root) or absolute.is_relative_to(root):
            raise BadInput(msg("out_in_system", None, path=shown, root=root))
    for what, folder in (protected or {}).items():
        base = folder.resolve()
        if target.is_relative_to(base):
            raise BadInput(msg("out_in_run", None, path=shown, what=what, base=one_line(base)))
    return target


def make_new_folder(target: Path) -> None:
    """Create ``target`` (its parents as needed) the way ``O_EXCL`` creates a file: ``os.mkdir`` fails if
    anything, a symlink included, took the name meanwhile; the link is never followed."""
    shown = one_line(target)

    def cannot(err: OSError) -> BadInput:
        detail = err.strerror or err
        return BadInput(
            msg("out_parent_missing", None, path=shown, parent=one_line(target.parent), detail=detail)
        )

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise cannot(err) from None
    try:
        os.mkdir(target)
    except FileExistsError:
        raise BadInput(msg("out_exists", None, path=shown)) from None
    except OSError as err:
        raise cannot(err) from None
