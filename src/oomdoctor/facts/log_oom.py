"""The numbers in an out-of-memory message, in MiB.

PyTorch has printed two formats. Since 2.1 (new): "Tried to allocate 4.64 GiB. GPU 3 has a total capacity of
31.74 GiB of which 1.41 GiB is free. [Process N has X memory in use.] Including non-PyTorch memory, this
process has 30.26 GiB memory in use. Of the allocated memory 23.51 GiB is allocated by PyTorch, and 5.51 GiB is
reserved by PyTorch but unallocated." Before (old): "Tried to allocate 896.00 MiB (GPU 2; 79.17 GiB total
capacity; 76.68 GiB already allocated; 381.31 MiB free; 77.24 GiB reserved in total by PyTorch)". Some 2.1
builds spelled "capacty". Host allocators give bytes ("you tried to allocate 1073741824 bytes").
"""

from __future__ import annotations

from oomdoctor.lazyre import compile_pattern, lazy
from oomdoctor.records import field, record

_UNIT_MIB = {
    "b": 1 / 1024**2,
    "byte": 1 / 1024**2,
    "bytes": 1 / 1024**2,
    "kb": 1 / 1024,
    "kib": 1 / 1024,
    "mb": 1.0,
    "mib": 1.0,
    "gb": 1024.0,
    "gib": 1024.0,
    "tb": 1024.0**2,
    "tib": 1024.0**2,
}
# torch prints binary units with "GiB"; a few tools print "GB" for the same thing: both are read as binary.
# A number starts where no digit, point or comma precedes it and has at most 25 digits and commas: linear to search
# (an unbounded `\d[\d,]*` tried at every digit of a 100,000-digit run is quadratic), and a number longer
# than any size is not read at all.
_SIZE = r"(?<![\d.,])(\d[\d,]{0,24}(?:\.\d{1,12})?)\s*(TiB|GiB|MiB|KiB|TB|GB|MB|KB|bytes|byte|B)\b"


def size_to_mib(value: str, unit: str) -> float:
    """ "4.64", "GiB" -> 4751.36. Raises ValueError on an unknown unit."""
    factor = _UNIT_MIB.get(unit.lower())
    if factor is None:
        raise ValueError(f"unknown size unit {unit!r}")
    return round(float(value.replace(",", "")) * factor, 2)


def _one(pattern: str, text: str) -> float | None:
    # a message copied from a terminal or a web page may carry doubled spaces or a line break between words
    m = compile_pattern(pattern.replace(" ", r"\s+")).search(text)  # its compiled form kept (lazyre)
    return size_to_mib(m.group(1), m.group(2)) if m else None


@record
class OomNumbers:
    """The sizes an out-of-memory message states, in MiB (None where it does not say)."""

    requested_mib: float | None = None
    capacity_mib: float | None = None
    free_mib: float | None = None
    process_in_use_mib: float | None = None
    allocated_mib: float | None = None
    reserved_mib: float | None = None
    reserved_unallocated_mib: float | None = None
    gpu_index: int | None = None
    other_processes: list[tuple[int, float]] = field(default_factory=list)  # (pid, MiB)
    allowed_mib: float | None = None  # old format "N allowed;": a per-process memory fraction is set
    private_pools_mib: float | None = None  # "with N allocated in private pools (e.g., CUDA Graphs)"
    current_active_mib: float | None = None  # Ascend NPU "N current active"


# One message header: "torch.cuda.OutOfMemoryError: CUDA out of memory", or "RuntimeError: CUDA out of memory".
_NEXT_MESSAGE = lazy(
    r"OutOfMemoryError: (?:(?:CUDA|HIP|NPU|XPU) out of memory)?|(?:CUDA|HIP|NPU|XPU) out of memory"
)


def first_message(text: str) -> str:
    """Only the first OOM message when two processes' messages ran into one line (seen in real logs)."""
    first = _NEXT_MESSAGE.search(text)
    if not first:
        return text
    second = _NEXT_MESSAGE.search(text, first.end())
    return text[: second.start()] if second else text


def parse_oom_numbers(text: str) -> OomNumbers:
    """Every size the message states, as MiB; what it does not state stays None."""
    text = first_message(text)
    n = OomNumbers()
    n.requested_mib = (
        _one(r"[Tt]ried to allocate " + _SIZE, text)
        or _one(r"unable to mmap " + _SIZE, text)
        or _one(r"Unable to allocate " + _SIZE, text)
    )
    gpu = compile_pattern(r"\b(?:GPU|NPU|XPU) (\d{1,4})\b").search(text)
    if gpu:
        n.gpu_index = int(gpu.group(1))
    # new format
    n.capacity_mib = _one(r"total capac\w* of " + _SIZE, text)
    n.free_mib = _one(r"of which " + _SIZE + r" is free", text)
    n.process_in_use_mib = _one(r"this process has " + _SIZE + r" memory in use", text)
    n.allocated_mib = _one(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch", text)
    n.reserved_unallocated_mib = _one(_SIZE + r" is reserved by PyTorch but unallocated", text)
    others = compile_pattern(r"Process\s+(\d{1,10})\s+has\s+" + _SIZE + r"\s+memory\s+in\s+use")
    for m in others.finditer(text):
        n.other_processes.append((int(m.group(1)), size_to_mib(m.group(2), m.group(3))))
    # old format: "(GPU 2; 79.17 GiB total capacity; 76.68 GiB already allocated; 381.31 MiB free; ...)"
    if n.capacity_mib is None:
        n.capacity_mib = _one(_SIZE + r" total capac\w*", text)
    if n.allocated_mib is None:
        n.allocated_mib = _one(_SIZE + r" already allocated", text)
    if n.free_mib is None:
        n.free_mib = _one(_SIZE + r" free\b", text)
    n.reserved_mib = _one(_SIZE + r" reserved in total by PyTorch", text) or _one(_SIZE + r" cached\)", text)
    n.allowed_mib = _one(_SIZE + r" allowed;", text)
    n.private_pools_mib = _one(r"with " + _SIZE + r" allocated in private pools", text)
    n.current_active_mib = _one(_SIZE + r" current active", text)
    _read_cut_tail(n, text)
    if n.requested_mib is None or n.free_mib is None or n.capacity_mib is None:
        from oomdoctor.facts.log_oom_loose import fill_loose

        fill_loose(n, text, size_to_mib)  # words mangled (OCR, lost spaces): facts/log_oom_loose.py
    if n.reserved_mib is not None and n.allocated_mib is not None and n.reserved_unallocated_mib is None:
        n.reserved_unallocated_mib = round(max(0.0, n.reserved_mib - n.allocated_mib), 2)
    if n.reserved_mib is None and n.allocated_mib is not None and n.reserved_unallocated_mib is not None:
        n.reserved_mib = round(n.allocated_mib + n.reserved_unallocated_mib, 2)
    return n


# A message cut short (a copy, a terminal's scrollback, a web page's excerpt) ends right after a number whose
# words are gone: "... this process has 39.28 GiB", "... of which 7.31 GiB". The number before the cut is still
# what its sentence states; read it when the words that lead to it are whole.
def _cut_words(words: str) -> str:
    """A regex for any start of ``words`` (a message may be cut inside a word: "22.25 GiB i[s free]")."""
    out = ""
    for ch in reversed(words):
        out = f"(?:{ch}{out})?"  # letters and spaces only: nothing to escape
    return out


_CUT_TAILS: tuple[tuple[str, str], ...] = (
    ("free_mib", r"of which " + _SIZE + _cut_words(" is free")),
    ("process_in_use_mib", r"this process has " + _SIZE + _cut_words(" memory in use")),
    ("allocated_mib", r"Of the allocated memory " + _SIZE + _cut_words(" is allocated by PyTorch")),
    ("allocated_mib", _SIZE + r" already"),
)


def _read_cut_tail(n: OomNumbers, text: str) -> None:
    """The last number of a message cut after it (see ``_CUT_TAILS``), where nothing else set that field."""
    tail = text.rstrip()[-160:]
    for name, pattern in _CUT_TAILS:
        if getattr(n, name) is not None:
            continue
        m = compile_pattern(pattern.replace(" ", r"\s+") + r"\s*$").search(tail)
        if m:
            setattr(n, name, size_to_mib(m.group(1), m.group(2)))
            return
    last = compile_pattern(r"Process\s+(\d{1,10})\s+has\s+" + _SIZE + r"(?:\s+memory(?:\s+in)?)?\s*$")
    m = last.search(tail)
    if m and all(pid != int(m.group(1)) for pid, _ in n.other_processes):
        n.other_processes.append((int(m.group(1)), size_to_mib(m.group(2), m.group(3))))
