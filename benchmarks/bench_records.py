"""What oomdoctor.records costs next to the stdlib dataclass it replaces on the start-up path: making a class,
and building, comparing, copying and printing instances, as ratios to ``@dataclass`` measured in the same run;
then how many record instances one ``diagnose --json`` of the demo builds, and how long they take.

    python benchmarks/bench_records.py [--repeats 7]

Each figure is the least of several runs (a run's own cost; a load only ever adds to it).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from oomdoctor import records  # noqa: E402

DEMO = ["diagnose", "--config", str(ROOT / "configs/keywords_clean_train.yaml"), "--log",
        str(ROOT / "configs/demo/train.log"), "--json"]  # fmt: skip


def _annotations(n_fields: int, n_defaults: int) -> tuple[dict[str, str], dict[str, Any]]:
    names = [f"f{i}" for i in range(n_fields)]
    defaults = {name: None for name in names[n_fields - n_defaults :]}
    return {name: "int | None" for name in names}, defaults


def _make_class(decorate: Callable[[type], type], n_fields: int, n_defaults: int, frozen: bool) -> type:
    annotations, defaults = _annotations(n_fields, n_defaults)
    cls = type(f"C{n_fields}", (), {"__annotations__": annotations, **defaults, "__module__": __name__})
    if decorate is records.record:
        return records.record(frozen=frozen)(cls)
    return dataclasses.dataclass(frozen=frozen)(cls)


def least_s(action: Callable[[], Any], number: int, repeats: int) -> float:
    """The least seconds of one ``action()`` over ``repeats`` runs of ``number`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            action()
        best = min(best, (time.perf_counter() - start) / number)
    return best


SHAPES = [  # (fields, of them with defaults, frozen): a Condition, a Marker, a Proposal, a ConfigFacts
    (3, 1, True),
    (10, 6, True),
    (14, 9, False),
    (55, 50, False),
]


def class_costs(repeats: int) -> None:
    print(f"{'making one class (fields, defaults, frozen)':46} {'dataclass':>11} {'record':>10} {'ratio':>7}")
    for n, d, frozen in SHAPES:
        theirs = least_s(lambda n=n, d=d, f=frozen: _make_class(dataclasses.dataclass, n, d, f), 20, repeats)
        mine = least_s(lambda n=n, d=d, f=frozen: _make_class(records.record, n, d, f), 20, repeats)
        label = f"  {n} fields, {d} defaults, {'frozen' if frozen else 'mutable'}"
        print(f"{label:46} {theirs * 1e6:8.1f} us {mine * 1e6:7.1f} us {mine / theirs:6.2f}x")


def _operations(
    dc: type, rec: type, n: int, d: int
) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(what, with the dataclass, with the record) for one shape."""
    required = {f"f{i}": i for i in range(n - d)}
    positional = tuple(required.values())
    some = {**required, f"f{n - 1}": 1}
    a_dc, b_dc, a_rec, b_rec = dc(**some), dc(**some), rec(**some), rec(**some)
    return [
        ("build by keyword", lambda: dc(**some), lambda: rec(**some)),
        ("build positionally", lambda: dc(*positional), lambda: rec(*positional)),
        ("==", lambda: a_dc == b_dc, lambda: a_rec == b_rec),
        ("replace", lambda: dataclasses.replace(a_dc, f0=9), lambda: records.replace(a_rec, f0=9)),
        ("repr", lambda: repr(a_dc), lambda: repr(a_rec)),
        ("asdict", lambda: dataclasses.asdict(a_dc), lambda: records.asdict(a_rec)),
    ]


def instance_costs(repeats: int) -> None:
    print(f"\n{'per instance (fields, defaults, frozen)':46} {'dataclass':>11} {'record':>10} {'ratio':>7}")
    for n, d, frozen in SHAPES:
        dc, rec = (_make_class(deco, n, d, frozen) for deco in (dataclasses.dataclass, records.record))
        for what, theirs_fn, mine_fn in _operations(dc, rec, n, d):
            theirs, mine = least_s(theirs_fn, 2000, repeats), least_s(mine_fn, 2000, repeats)
            label = f"  {n}/{d}/{'frozen' if frozen else 'mutable'}: {what}"
            print(f"{label:46} {theirs * 1e6:8.2f} us {mine * 1e6:7.2f} us {mine / theirs:6.2f}x")


def in_a_diagnosis() -> None:
    """Counts the record instances one in-process ``diagnose --json`` builds (the modules imported afresh with
    a counting ``__init__``), and the time spent building them."""
    for name in [m for m in sys.modules if m.startswith("oomdoctor") and m != "oomdoctor.records"]:
        del sys.modules[name]
    made: dict[str, int] = {}
    spent = [0.0, 0]  # seconds in the outermost __init__ calls, nesting depth
    plain_init = records._init

    def counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        made[type(self).__qualname__] = made.get(type(self).__qualname__, 0) + 1
        spent[1] += 1
        start = time.perf_counter()
        try:
            plain_init(self, *args, **kwargs)
        finally:
            spent[1] -= 1
            if not spent[1]:
                spent[0] += time.perf_counter() - start

    records._init = counting_init  # type: ignore[assignment]
    try:
        from oomdoctor.cli import main

        sys.argv = ["oomdoctor", *DEMO]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main()
    finally:
        records._init = plain_init  # type: ignore[assignment]
    total = sum(made.values())
    top = ", ".join(f"{k} {v}" for k, v in sorted(made.items(), key=lambda kv: -kv[1])[:6])
    print(f"\nrecords built by one diagnose --json of the demo: {total} ({top}, ...)")
    print(f"time in their __init__ (with __post_init__, timer included): {spent[0] * 1000:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    class_costs(args.repeats)
    instance_costs(args.repeats)
    in_a_diagnosis()


if __name__ == "__main__":
    main()
