"""Messy log text put back into the lines the processes printed, before the scanner reads it.

Three kinds of mess are seen in real reports:

- an OOM message wrapped across lines: by the terminal at a fixed width (the break may fall inside a word or
  a number: "total capac" / "ity of 79.15 GiB", "2.0" / "0 GiB") or by a web page or the WebUI at spaces;
- several processes writing at once: two messages run into one line
  ("torch.cudatorch.cuda..OutOfMemoryErrorOutOfMemoryError: : CUDA out of memory...") and one process's
  "[rank1]: ..." line starts in the middle of another's;
- job platforms that tag each line with its process ("(RayTrainWorker pid=4711, ip=10.0.0.2) ..."): the tag is
  rewritten to a prefix the line reader already groups by ("pid4711: ..."), so frames go with their process.

Pure text in, text out; a log without such mess comes out unchanged.
"""

from __future__ import annotations

import re

from oomdoctor.facts.log_text import split_prefix
from oomdoctor.lazyre import lazy

# The start of an OOM message, and the phrases its numbers end with (new format / old format).
_OOM_START = lazy(r"(?:CUDA|HIP|NPU|XPU) out of memory|OutOfMemoryError")
_NUMBERS_END = lazy(r"reserved by PyTorch but unallocated|reserved in total by PyTorch\)?|cached\)")
_NUMBERS_START = lazy(r"[Tt]ried to allocate|total capac")
# A line that begins something else: the message is over before it.
_NEW_RECORD = lazy(
    r"^\s*(?:Traceback \(most recent|File \"|\[(?:rank|default)\d+\]:|\d{4}-\d\d-\d\d[ T]\d|"
    r"\[(?:INFO|WARNING|ERROR|DEBUG)|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b:|W\d{4} |E\d{4} |I\d{4} )"
)
_MAX_WRAPPED_LINES = 12
# Words of both message formats: a break between two pieces that join into one of these fell inside it.
_VOCAB = frozenset(
    [
        "cuda",
        "out",
        "of",
        "memory",
        "tried",
        "to",
        "allocate",
        "gpu",
        "has",
        "a",
        "total",
        "capacity",
        "capacty",
        "which",
        "is",
        "free",
        "process",
        "memory",
        "in",
        "use",
        "including",
        "non-pytorch",
        "this",
        "the",
        "allocated",
        "by",
        "pytorch",
        "and",
        "reserved",
        "but",
        "unallocated",
        "if",
        "large",
        "try",
        "setting",
        "pytorch_cuda_alloc_conf=expandable_segments:true",
        "avoid",
        "fragmentation",
        "see",
        "documentation",
        "for",
        "management",
        "already",
        "total",
        "cached",
        "allowed",
        "max_split_size_mb",
        "gib",
        "mib",
        "kib",
        "bytes",
        "outofmemoryerror",
        "torch.cuda.outofmemoryerror",
        "torch.outofmemoryerror",
        "environment",
        "variables",
    ]
)
_NUMBER = lazy(r"^\d[\d,]*(?:\.\d*)?$|^\.\d+$")

# Two processes' identical headers interleaved: "torch.cudatorch.cuda..OutOfMemoryErrorOutOfMemoryError: : ".
_DOUBLED_HEADER = lazy(r"((?:torch\.)?(?:cuda)?)\1(\.?)\2(OutOfMemoryError)\3:\s*:\s*")
# A second message header later in the same line (two processes, one line).
_SECOND_HEADER = lazy(
    r"(?:(?:torch\.(?:cuda\.)?)?OutOfMemoryError: |RuntimeError: )?(?:CUDA|HIP|NPU|XPU) out of memory\. Tried"
)
# A warning that caught the OOM and prints it after "Error: " (FSDP's "Failed to clone() tensor ... Error: CUDA
# out of memory ..."): the warning is a line of its own (a marker may read it), the message another. A line whose
# head was cut off still shows the warning by its own words ("... Please check clone implementation of x. Error: ").
_WARNING_CAUGHT = lazy(
    r"(?:Warning: |state_dict entry could point to invalid memory|Please check clone implementation of ).*\bError: $"
)
# A launcher prefix in the middle of a line: another process's line started there.
_MIDLINE_RANK = lazy(r"(?<=\S)(?=\[(?:rank|default)\d+\]:)")
# A line that may start with a launcher's prefix (torchrun's "[rank3]: ", pdsh's "10.0.0.6: "): facts/log_text.py
# splits it off.
_MAY_BE_PREFIXED = lazy(r"^(?:\[|[\w.-]{1,63}: )")
# A frame line behind a stray fragment of another process's line (".  File ...", "`  File ...").
_FRAGMENT_BEFORE_FRAME = lazy(r'^([^\w\s\[(]{1,3})(\s+File "[^"]+", line \d+, in )')
# Colab prints a notebook's frames as links: "[/usr/lib/python3.10/site-packages/x.py](https://localhost:8080/#)
# in f(a, b)". Rewritten into IPython's own form ("File x.py:0, in f(a, b)"; the "--> 781" line that follows
# gives the running line) so the frame reader knows them.
_COLAB_FRAME = lazy(r"^\s*\[(?P<path>[^\]\s]+\.pyx?)\]\([^)]*\) in (?P<func>[\w.<>]+)(?P<rest>\(.*)?$")
# Ray (OpenRLHF, verl, Ray Train): "(RayTrainWorker pid=4711, ip=10.0.0.2) text" or "(pid=4711) text".
_RAY_TAG = lazy(r"^\((?:[\w.:-]+ )?pid=(\d+)(?:, ip=[\d.]+)?\)\s?")


def reassemble(text: str) -> str:
    """The text with wrapped OOM messages joined, glued processes split and per-process tags normalised."""
    if "out of memory" not in text and "OutOfMemoryError" not in text and "pid=" not in text:
        return text
    lines = text.splitlines()
    out: list[str] = []
    for line in lines:
        out.extend(_split_glued(_ray_tag(line)))
    return "\n".join(_join_wrapped(out)) + ("\n" if text.endswith(("\n", "\r")) else "")


def _colab_frame(line: str) -> str:
    if "](" not in line:
        return line
    m = _COLAB_FRAME.match(line)
    return f"File {m.group('path')}:0, in {m.group('func')}{m.group('rest') or ''}" if m else line


def _ray_tag(line: str) -> str:
    line = _colab_frame(line)
    if not line.startswith("("):
        return line
    m = _RAY_TAG.match(line)
    return f"pid{m.group(1)}: {line[m.end() :]}" if m else line


def _split_glued(line: str) -> list[str]:
    """One printed line per process: a mid-line rank prefix or a second OOM header starts a new line."""
    if "OutOfMemoryErrorOutOfMemoryError" in line:
        line = _DOUBLED_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}: ", line)
    m = _FRAGMENT_BEFORE_FRAME.match(line) if 'File "' in line else None
    if m is not None:
        line = line[m.end(1) :]
    parts = _MIDLINE_RANK.split(line) if "]:" in line else [line]
    out: list[str] = []
    for part in parts:
        out.extend(_split_second_message(part))
    return out


def _split_second_message(line: str) -> list[str]:
    if "out of memory" not in line:
        return [line]
    first = _SECOND_HEADER.search(line)
    if first is None:
        return [line]
    if first.start() > 0 and _WARNING_CAUGHT.search(line[: first.start()]):
        return [line[: first.start()].rstrip(), *_split_second_message(line[first.start() :])]
    second = _SECOND_HEADER.search(line, first.end())
    if second is None:
        return [line]
    return [line[: second.start()].rstrip(), *_split_second_message(line[second.start() :])]


def _join_wrapped(lines: list[str]) -> list[str]:
    """An OOM message broken over lines becomes one line again (numbers and words whole)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not _OOM_START.search(line) or _NUMBERS_END.search(line):
            out.append(line)
            continue
        joined, taken = _gather(line, lines, i)
        out.append(joined)
        i += taken
    return out


def _gather(line: str, lines: list[str], start: int) -> tuple[str, int]:
    """Join the lines after ``line`` that continue its message. Returns (joined, lines taken). A message a
    launcher prefixed line by line ("[rank3]: ...", "10.0.0.6: ...") goes on in the lines of the same prefix,
    read without it."""
    joined, taken = line, 0
    key = split_prefix(line).key if _MAY_BE_PREFIXED.match(line) else ""
    for nxt in lines[start : start + _MAX_WRAPPED_LINES]:
        if key:
            own = split_prefix(nxt)
            nxt = own.text.lstrip(" ") if own.key == key else nxt
        if not nxt.strip() or _NEW_RECORD.match(nxt) or _OOM_START.search(nxt) and _NUMBERS_START.search(nxt):
            break
        candidate = _join(joined, nxt)
        if not _NUMBERS_START.search(candidate) and taken >= 1:
            break  # two lines on and still no number: not a wrapped message
        joined, taken = candidate, taken + 1
        if _NUMBERS_END.search(joined):
            break
    if not _NUMBERS_START.search(joined):
        return line, 0
    return joined, taken


def _join(prev: str, nxt: str) -> str:
    """Join two pieces of a wrapped line: without a space when the break fell inside a word or a number."""
    if prev.endswith((" ", "\t")) or nxt.startswith((" ", "\t")):
        return prev.rstrip() + " " + nxt.strip()
    tail = re.search(r"[\w.,:=_-]*$", prev)
    head = re.match(r"[\w.,:=_-]*", nxt)
    word = ((tail.group(0) if tail else "") + (head.group(0) if head else "")).strip(".,;:")
    inside = word.lower() in _VOCAB or bool(_NUMBER.match(word))
    return prev + ("" if inside else " ") + nxt
