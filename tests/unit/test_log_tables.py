"""log_markers.yaml: every example line is recognised as its entry says, and the data is well formed."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from oomdoctor.facts.log_scan import LogScanner
from oomdoctor.facts.log_tables import MARKERS_FILE, tables
from oomdoctor.facts.types import PHASES

RAW = tables().raw
FORM_EXAMPLES = [(f["kind"], e) for f in RAW["oom_forms"] for e in f.get("examples", [])]
MARKER_EXAMPLES = [
    (
        m.get("context")
        or (
            "setup"
            if m.get("setup")
            else "launch"
            if m.get("launch")
            else "resume"
            if m.get("resume")
            else "sharding"
        ),
        e,
    )
    for m in RAW["markers"]
    for e in m.get("examples", [])
]
# a marker that counts only after another context (``after``) is fed a line of that context first
AFTER = {m["examples"][0]: m["after"] for m in RAW["markers"] if m.get("after")}
PRIMER = {"after_train": "{'train_runtime': 12.5, 'train_loss': 1.1, 'epoch': 1.0}"}


def test_every_form_and_marker_has_examples() -> None:
    assert all(f.get("examples") for f in RAW["oom_forms"])
    assert all(m.get("examples") for m in RAW["markers"])


@pytest.mark.parametrize(("kind", "line"), FORM_EXAMPLES)
def test_oom_form_example_is_that_kind(kind: str, line: str) -> None:
    scanner = LogScanner()
    scanner.feed_text(line + "\n")
    run, _ = scanner.result()
    assert run.failure is not None, line
    assert run.failure.kind == kind


@pytest.mark.parametrize(("context", "line"), MARKER_EXAMPLES)
def test_marker_example_sets_its_context(context: str, line: str) -> None:
    scanner = LogScanner()
    primer = PRIMER[AFTER[line]] + "\n" if line in AFTER else ""
    scanner.feed_text(primer + line + "\n")
    run, _ = scanner.result()
    if context == "setup":
        assert run.setup_seen
    elif context == "launch":
        assert run.launched and run.snap.context is None
    elif context == "resume":
        assert run.resumed and run.snap.context is None
    elif context == "sharding":
        assert run.fsdp_seen and run.snap.context is None
    else:
        assert run.snap.context == context


def test_each_regex_alternative_carries_a_hint() -> None:
    """The fast pre-check only tries a form's regex when one of its hints is in the line: a top-level
    alternative with no hint in it could never match."""
    for form in RAW["oom_forms"]:
        for alternative in _top_level_alternatives(form["pattern"]):
            literal = re.sub(r"\\(.)", r"\1", alternative)
            assert any(h in literal for h in form["hint"]), (form["kind"], alternative)


def _top_level_alternatives(pattern: str) -> list[str]:
    parts, depth, current, escaped, in_class = [], 0, "", False, False
    for ch in pattern:
        if escaped:
            current += ch
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            current += ch
            continue
        if in_class:
            in_class = ch != "]"
            current += ch
            continue
        in_class = ch == "["
        depth += ch == "("
        depth -= ch == ")"
        if ch == "|" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]


def test_frame_and_code_entries_name_known_roles_and_phases() -> None:
    for entry in RAW["frames"] + RAW["code"]:
        assert entry["role"] in ("context", "after_step", "train", "rollout", "loss", "forward")
        if entry["role"] == "context":
            assert entry["phase"] in PHASES
        assert entry["why"]["en"] and entry["why"]["zh"]
    for entry in RAW["markers"]:
        assert entry["why"]["en"] and entry["why"]["zh"]


CARD_EXAMPLES = [(f["pattern"], e) for f in RAW["card_names"]["forms"] for e in f["examples"]]


@pytest.mark.parametrize(("pattern", "line"), CARD_EXAMPLES)
def test_card_name_example_gives_a_name(pattern: str, line: str) -> None:
    scanner = LogScanner()
    scanner.feed_text(line + "\n")
    run, _ = scanner.result()
    assert run.card_name, line
    assert not run.card_name.endswith("...")
    assert re.search(pattern, line)


ZERO_STAGE_EXAMPLES = [(z["pattern"], e) for z in RAW["zero_stage"]["lines"] for e in z["examples"]]


@pytest.mark.parametrize(("pattern", "line"), ZERO_STAGE_EXAMPLES)
def test_zero_stage_example_gives_the_stage(pattern: str, line: str) -> None:
    scanner = LogScanner()
    scanner.feed_text(line + "\n")
    run, _ = scanner.result()
    assert run.zero_stage == int(re.search(pattern, line).group("stage"))


def test_tables_load_once_with_the_safe_loader() -> None:
    assert tables() is tables()
    text = MARKERS_FILE.read_text(encoding="utf-8")
    assert "!!python" not in text


def test_importing_the_log_reader_stays_light() -> None:
    code = (
        "import sys, oomdoctor.facts.log; "
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'llamafactory', 'textual') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
