"""The input layer's own guarantees, one by one (the battery checks them through every verb)."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from oomdoctor import inputs
from oomdoctor.errors import BadInput, one_line
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.trial.runner import run_trial


def test_a_fifo_is_refused_at_once_never_opened(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    os.mkfifo(path)
    started = time.monotonic()
    with pytest.raises(BadInput, match="FIFO"):
        inputs.read_text(path, what="config", max_bytes=1 << 20)
    assert time.monotonic() - started < 1


def test_size_is_checked_before_reading_sparse_files_too(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    with open(path, "wb") as f:
        f.truncate(3 << 30)  # 3 GiB, no disk
    with pytest.raises(BadInput, match="too big"):
        inputs.read_bytes(path, what="config", max_bytes=inputs.MAX_BYTES["config"])


def test_yaml_alias_expansion_and_depth_are_bounded() -> None:
    bomb = "a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{n}: &{n} [" + ",".join([f"*{p}"] * 10) + "]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    started = time.monotonic()
    with pytest.raises(BadInput, match="alias"):
        inputs.load_yaml(bomb, path="bomb.yaml")
    with pytest.raises(BadInput, match="contains itself"):
        inputs.load_yaml("a: &a [*a]\n", path="loop.yaml")
    with pytest.raises(BadInput, match="nests deeper"):
        inputs.load_yaml("a: " + "[" * 100 + "]" * 100, path="deep.yaml")
    assert time.monotonic() - started < 2
    shared = "base: &b {x: 1, y: 2}\none: *b\ntwo: *b\n"  # ordinary anchors still work
    assert inputs.load_yaml(shared, path="ok.yaml") == {
        "base": {"x": 1, "y": 2},
        "one": {"x": 1, "y": 2},
        "two": {"x": 1, "y": 2},
    }


@pytest.mark.parametrize(
    "text", ["[" * 100_000 + "]" * 100_000, '{"a": NaN}', '{"a": 1e400}', '{"a": ' + "9" * 5000 + "}"]
)
def test_json_refuses_depth_nan_overflow_and_huge_integers(text: str) -> None:
    with pytest.raises(BadInput) as err:
        inputs.load_json(text, path="x.json")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("value", "ok"),
    [(4, True), ("4", True), (4.0, True), (" 8 ", True), (0, False), (True, False), ("1e309", False),
     (math.nan, False), (math.inf, False), (10**30, False), ("9" * 4400, False), ([4], False), (-1, False)],
)  # fmt: skip
def test_as_int_takes_whole_numbers_in_range_only(value: object, ok: bool) -> None:
    if ok:
        assert inputs.as_int(value, path="c.yaml", key="k", low=1, high=1 << 20) in (4, 8)
    else:
        with pytest.raises(BadInput, match="c.yaml: k should be"):
            inputs.as_int(value, path="c.yaml", key="k", low=1, high=1 << 20)


def test_short_repr_is_safe_for_any_value() -> None:
    assert "digits" in inputs.short_repr(10**5000)
    assert one_line("a\nb\r\x1b") == "a\\nb\\r\\x1b"


def test_csv_rows_are_streamed_with_line_and_row_budgets(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("a,b\n" + "1,2\n" * 50)
    assert len(list(inputs.iter_csv_rows(path, what="csv"))) == 51  # the header first
    with pytest.raises(BadInput, match="more than 10 rows"):
        list(inputs.iter_csv_rows(path, what="csv", max_rows=10))
    path.write_text("a,b\n1," + "2" * 10_000 + "\n")
    with pytest.raises(BadInput, match="line 2 is longer"):
        list(inputs.iter_csv_rows(path, what="csv"))


def test_new_folders_refuse_links_system_roots_and_run_folders(tmp_path: Path) -> None:
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "target")  # dangling
    with pytest.raises(BadInput, match="symbolic link"):
        inputs.check_new_folder(link)
    for system in ("/proc/x", "/sys/x", "/dev/null", "/dev/shm/x"):
        with pytest.raises(BadInput):
            inputs.check_new_folder(system)
    with pytest.raises(BadInput, match="output_dir"):
        inputs.check_new_folder(tmp_path / "saves" / "new", protected={"output_dir": tmp_path / "saves"})
    fresh = inputs.check_new_folder(tmp_path / "fresh")
    inputs.make_new_folder(fresh)
    assert fresh.is_dir()
    race = tmp_path / "race"
    race.symlink_to(tmp_path / "elsewhere")  # the name taken by a link after the check
    with pytest.raises(BadInput, match="already exists"):
        inputs.make_new_folder(race)
    assert not (tmp_path / "elsewhere").exists()  # the link was never followed


@pytest.mark.parametrize(
    ("timeout_s", "interval_s"), [(math.nan, 0.2), (math.inf, 0.2), (10.0, 0.0), (10.0, math.nan)]
)
def test_run_trial_refuses_values_that_never_end_or_busy_loop(
    tmp_path: Path, timeout_s: float, interval_s: float
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("model_name_or_path: x\noutput_dir: saves/x\n")
    with pytest.raises(BadInput):
        run_trial(config, steps=1, out_dir=tmp_path / "t", timeout_s=timeout_s, interval_s=interval_s,
                  launcher="/bin/false", source=FakeGpuSource.unavailable())  # fmt: skip
    assert not (tmp_path / "t").exists()


def test_a_crash_is_one_line_and_exit_2_and_debug_shows_the_traceback(monkeypatch, capsys) -> None:
    from oomdoctor.cli import main
    from oomdoctor.commands import estimate

    def crash(args: object) -> int:
        raise ZeroDivisionError("a bug\nwith a second line")

    monkeypatch.setattr(estimate, "run", crash)
    assert main(["estimate", "--config", "x.yaml"]) == 2  # never 1: that would read as "the run failed"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ZeroDivisionError" in err and "--debug" in err and "Traceback" not in err
    with pytest.raises(ZeroDivisionError):
        main(["estimate", "--config", "x.yaml", "--debug"])


def test_a_newline_in_a_value_is_escaped_in_the_error(capsys) -> None:
    from oomdoctor.cli import main

    assert main(["diagnose", "--config", "no\nsuch.yaml"]) == 2
    assert main(["diagnose", "--log", "x.log", "--answer", "phase\nrm -rf /"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "no\\nsuch.yaml" in err
