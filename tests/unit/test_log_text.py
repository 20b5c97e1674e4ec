"""Lines as the reader sees them: prefixes, ANSI colours, "\\r" redraws, encodings."""

from __future__ import annotations

import codecs

import pytest

from oomdoctor.facts.log_text import (
    bom_encoding,
    decode_block,
    looks_binary,
    split_lines,
    split_prefix,
    strip_ansi,
)


@pytest.mark.parametrize(
    ("line", "key", "rank", "host", "text"),
    [
        ('[rank3]:   File "x.py", line 1, in f', "rank3", 3, None, '  File "x.py", line 1, in f'),
        ("[rank0]:[W1103 10:00:00] warning", "rank0", 0, None, "[W1103 10:00:00] warning"),
        (
            "[default1]:[rank1]: torch.OutOfMemoryError: CUDA",
            "rank1",
            1,
            None,
            "torch.OutOfMemoryError: CUDA",
        ),
        ("gpu-q-13: ret = input.softmax(dim)", "host:gpu-q-13", None, "gpu-q-13", "ret = input.softmax(dim)"),
        ("gpu-q-13:     ret = x", "host:gpu-q-13", None, "gpu-q-13", "    ret = x"),
        ("worker-2: [rank5]: boom", "worker-2/rank5", 5, "worker-2", "boom"),
        ("3: srun task line", "rank3", 3, None, "srun task line"),
        ("RuntimeError: CUDA out of memory.", "", None, None, "RuntimeError: CUDA out of memory."),
        ("torch.cuda.OutOfMemoryError: CUDA out", "", None, None, "torch.cuda.OutOfMemoryError: CUDA out"),
        ("  0%|          | 0/30 [00:00<?, ?it/s]", "", None, None, "  0%|          | 0/30 [00:00<?, ?it/s]"),
        ("[INFO|trainer.py:2078] 2024-06-01 >> x", "", None, None, "[INFO|trainer.py:2078] 2024-06-01 >> x"),
    ],
)
def test_split_prefix(line: str, key: str, rank: int | None, host: str | None, text: str) -> None:
    p = split_prefix(line)
    assert (p.key, p.rank, p.host, p.text) == (key, rank, host, text)


def test_ansi_colours_and_cursor_moves_are_removed() -> None:
    assert (
        strip_ansi("\x1b[1;31mtorch.OutOfMemoryError\x1b[0m: \x1b[31mCUDA\x1b[0m")
        == "torch.OutOfMemoryError: CUDA"
    )
    assert strip_ansi("bar\x1b[A\x1b]0;title\x07done") == "bardone"
    assert strip_ansi("plain") == "plain"


def test_carriage_return_redraws_become_lines() -> None:
    assert split_lines("a\r  1%|\r  2%|\r\nb\n\x1b[32mc\x1b[0m") == ["a", "  1%|", "  2%|", "b", "c"]


def test_utf8_is_kept() -> None:
    text, enc = decode_block("训练 OOM\n".encode())
    assert (text, enc) == ("训练 OOM\n", "utf-8")


def test_gbk_bytes_are_recognised() -> None:
    raw = "正在加载数据集 D:\\数据\\train.json\r\ntorch.OutOfMemoryError: CUDA out of memory.\r\n".encode(
        "gbk"
    )
    text, enc = decode_block(raw)
    assert enc == "gbk"
    assert "正在加载数据集" in text and "OutOfMemoryError" in text


def test_a_stray_bad_byte_stays_utf8_with_a_replacement() -> None:
    text, enc = decode_block("关键词 ok ".encode() + b"\xff" + b" tail\n")
    assert enc == "utf-8"
    assert "关键词" in text and "\ufffd" in text


def test_utf16_with_bom() -> None:
    raw = codecs.BOM_UTF16_LE + "line one\r\nline two\r\n".encode("utf-16-le")
    assert bom_encoding(raw) == "utf-16-le"
    assert not looks_binary(raw)
    text, enc = decode_block(raw, "utf-16-le")
    assert text.splitlines() == ["line one", "line two"]


def test_binary_sniff() -> None:
    assert looks_binary(b"PK\x03\x04\x00\x00")
    assert not looks_binary(b"plain text\n")
    assert not looks_binary(b"x" * 9000 + b"\x00")  # only the first 8 KiB count
