"""Numbers are written for people in one place: report/units.py (sizes, counts, times) and report/table.py
(display width). A new f-string that divides by 1024, separates thousands or measures a Chinese character by
hand would be a second formatter; this test names the file and line."""

from __future__ import annotations

import re
from pathlib import Path

import oomdoctor

SRC = Path(oomdoctor.__file__).parent
AD_HOC = {
    "a size converted inside a format field": re.compile(r"\{[^{}\n]*/\s*1024[^{}\n]*:[^{}\n]*\}"),
    "thousands separated inside a format field": re.compile(r"\{[^{}\n]*:[+ -]?[<>^]?\d*,(?:\.\d+)?[fd]?\}"),
    "display width measured by hand": re.compile(r"east_asian_width\("),
}
# Where the pattern is still allowed, and why.
ALLOWED = {
    "report/units.py": "the formatters themselves",
    "catalogue/__init__.py": "its docstring shows a template's format spec (the templates are in catalogue/*.yaml)",
    "facts/config.py": "readers' bound messages; facts may not import report.units under the layers contract",
    "cli.py": "help-text wrapping on the --help start-up path, which rich.cells would slow by ~2.6 ms",
}


def _offences() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            found += [f"{name}:{number}: {what}" for what, rx in AD_HOC.items() if rx.search(line)]
    return found


def test_no_module_formats_numbers_by_hand() -> None:
    assert _offences() == []


def test_the_check_would_see_a_hand_made_formatter() -> None:
    assert AD_HOC["a size converted inside a format field"].search('f"{mib / 1024:.2f} GiB"')
    assert AD_HOC["thousands separated inside a format field"].search('f"{value:,.0f}"')
    assert AD_HOC["thousands separated inside a format field"].search('f"{n:,}"')
    assert AD_HOC["thousands separated inside a format field"].search('f"{d:+,.0f}"')
    assert not AD_HOC["thousands separated inside a format field"].search('f"{loss:.4f}"')


# Catalogue templates that still format a raw number themselves, and why.
TEMPLATES_ALLOWED = {
    "cal_headline": "filled in estimate/calibrate.py, below report in the layers contract",
    "watch_every": "the interval as the user typed it ({interval:g}), not a measured number",
}
_SPEC = re.compile(r"^  ([a-z0-9_]+): .*\{[a-z_.]+:[^}]*\}")


def test_catalogue_templates_take_numbers_already_written() -> None:
    for lang in ("en", "zh"):
        text = (SRC / "catalogue" / f"{lang}.yaml").read_text(encoding="utf-8")
        keys = {m.group(1) for line in text.splitlines() if (m := _SPEC.match(line))}
        assert keys <= set(TEMPLATES_ALLOWED), (
            f"{lang}.yaml formats numbers in {sorted(keys - set(TEMPLATES_ALLOWED))}"
        )
