"""Log bytes to clean lines: encodings (UTF-8, GBK, UTF-16), ANSI colours, progress-bar redraws, and the
``[rank3]:`` / ``gpu-q-13:`` prefixes that multi-GPU launchers put in front of every line.

Kept apart from the scanner so the big-file reader and the text parser share one idea of what a line is.
"""

from __future__ import annotations

import codecs

from oomdoctor.lazyre import lazy
from oomdoctor.records import record

# CSI sequences (colours, cursor up "\x1b[A"), OSC sequences (titles, links) and two-byte escapes.
_ANSI = lazy(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

# torchrun / torch elastic: "[rank3]:" (and "[default3]:" from --tee / --log-dir); several may stack.
_RANK_PREFIX = lazy(r"^\[(?:rank|default)(\d{1,6})\]:\s?")  # no cluster has a million ranks
# pdsh (DeepSpeed multi-node): "gpu-q-13: ...", srun -l: "3: ...". A host name carries a digit, which keeps
# "RuntimeError: ..." and "torch.cuda.OutOfMemoryError: ..." from looking like hosts.
_HOST_PREFIX = lazy(r"^(\d{1,6}|[A-Za-z0-9][\w.-]*\d[\w.-]*|localhost): ")

BINARY_SNIFF_BYTES = 8192


@record(frozen=True)
class Prefixed:
    """One log line with its launcher prefix taken off. ``key`` groups the lines of one process."""

    key: str
    rank: int | None
    host: str | None
    text: str


def split_prefix(line: str) -> Prefixed:
    """Take off rank and host prefixes (at most three stacked), keeping the rest of the line as printed."""
    rank: int | None = None
    host: str | None = None
    text = line
    for _ in range(3):
        if text.startswith("["):
            m = _RANK_PREFIX.match(text)
            if m:
                rank = int(m.group(1))
                text = text[m.end() :]
                continue
        if ": " in text[:64]:
            m = _HOST_PREFIX.match(text, 0, 72)  # the ": " is in the first 64 characters
            if m:
                label = m.group(1)
                if label.isdecimal() and len(label) <= 6:
                    rank = int(label) if rank is None else rank
                else:
                    host = label
                text = text[m.end() :]
                continue
        break
    if rank is None and host is None:
        return Prefixed("", None, None, text)
    key = f"rank{rank}" if rank is not None else f"host:{host}"
    if rank is not None and host is not None:
        key = f"{host}/rank{rank}"
    return Prefixed(key, rank, host, text)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def split_lines(text: str) -> list[str]:
    """Lines as a terminal would show them over time: "\\r" redraws become separate lines."""
    return strip_ansi(text).splitlines()


def bom_encoding(head: bytes) -> str | None:
    """The encoding a byte-order mark announces (PowerShell's ``>`` writes UTF-16 with a BOM)."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith(codecs.BOM_UTF16_LE):
        return "utf-16-le"
    if head.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be"
    return None


def looks_binary(head: bytes) -> bool:
    """NUL bytes in the first 8 KiB of a file that is not UTF-16: not a text log."""
    if bom_encoding(head) in ("utf-16-le", "utf-16-be"):
        return False
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def decode_block(data: bytes, encoding: str | None = None) -> tuple[str, str]:
    """Decode bytes that end on a line boundary. Returns (text, encoding used).

    UTF-8 first; when that fails, GBK (Chinese Windows consoles) is used if it explains the bytes much
    better. Whatever still does not decode becomes U+FFFD: a log is never refused for its bytes.
    """
    if encoding and encoding.startswith("utf-16"):
        return data.decode(encoding, errors="replace").lstrip("\ufeff"), encoding
    if encoding == "utf-8-sig":
        data = data[3:] if data.startswith(codecs.BOM_UTF8) else data
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    as_utf8 = data.decode("utf-8", errors="replace")
    bad_utf8 = as_utf8.count("\ufffd")
    as_gbk = data.decode("gbk", errors="replace")
    bad_gbk = as_gbk.count("\ufffd")
    if bad_utf8 >= 2 and bad_gbk * 4 < bad_utf8:
        return as_gbk, "gbk"
    return as_utf8, "utf-8"
