"""log_markers.yaml, loaded once and compiled: the knowledge the log scanner applies."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from oomdoctor.datafiles import load_data_file
from oomdoctor.lazyre import lazy
from oomdoctor.records import field, record
from oomdoctor.text import Text

MARKERS_FILE = Path(__file__).with_name("log_markers.yaml")


@record(frozen=True)
class OomForm:
    """One way an out-of-memory is printed: its hints, its pattern and what ran out."""

    kind: str
    ran_out_of: str
    priority: int
    pattern: re.Pattern[str]
    hints: tuple[str, ...]
    only_without_error: bool = False


@record(frozen=True)
class FrameRule:
    """A traceback frame (function, file) that tells what the run was doing."""

    role: str  # context / after_step / train / loss / forward
    phase: str | None
    functions: frozenset[str]
    files: tuple[str, ...]
    why: Text
    setup_step: str | None = None  # what the set-up this frame runs allocates (optimizer_init / ddp_buckets)

    def matches(self, function: str | None, path: str | None) -> bool:
        if self.functions and (function is None or function not in self.functions):
            return False
        if self.files:
            return path is not None and any(f in path for f in self.files)
        return bool(self.functions)


@record(frozen=True)
class CodeRule:
    """A running source line that tells what the run was doing."""

    role: str
    phase: str | None
    contains: tuple[str, ...]
    why: Text
    setup_step: str | None = None
    # the line calls a set-up step of its own inside a frame that is set-up too (DeepSpeed's engine __init__
    # calling _configure_distributed_model): the called step says what was allocated, over the frame's function
    over_frame: bool = False


@record(frozen=True)
class Marker:
    """A log line that sets the phase context (or marks the run's set-up)."""

    context: str | None  # None for set-up markers
    setup: bool
    pattern: re.Pattern[str]
    why: Text
    after: str | None = None  # counts only when the run's context is this one (e.g. after_train)
    warns: bool = False  # the line is a warning from that phase's own code (the phase was in trouble there)
    sharding: str | None = None  # the line shows what shards the run (fsdp), with or without a context
    # a load that happens inside a training step (an RL trainer's generator waking up for its rollout): the
    # steps already completed do not contradict it
    in_step: bool = False
    # the line is a launcher's own (it started the run's processes): the run is under way, nothing loaded yet
    launch: bool = False
    # the bare progress bars that follow the line are that phase's own (an export merging layer after layer),
    # not training steps
    owns_bars: bool = False
    # the line is an export's command (LLaMA-Factory's export, ms-swift's merge): the run loads a model to merge or
    # quantize it and write a copy; it trains nothing
    export: bool = False
    # the line says the run resumes from a checkpoint (its weights and optimizer state read back before a step)
    resume: bool = False
    hints: tuple[str, ...] = ()  # plain substrings one of which every line it matches holds (none: not said)

    def may_match(self, text: str) -> bool:
        """The line holds one of the hints (or the marker has none), so the pattern is worth trying (and
        compiling: a marker whose hint never shows up in a log is never compiled)."""
        return not self.hints or any(h in text for h in self.hints)


@record(frozen=True)
class AllocatorWarning:
    """An allocator warning line, and how its count adds up."""

    pattern: re.Pattern[str]
    count: str | None  # "add" / "max" / None


@record(frozen=True)
class Tables:
    """Everything ``log_markers.yaml`` holds, with its patterns ready to search."""

    oom_forms: tuple[OomForm, ...]
    oom_hint: re.Pattern[str]
    library_kinds: tuple[tuple[str, tuple[str, ...]], ...]
    run_start: re.Pattern[str]
    frames: tuple[FrameRule, ...]
    code: tuple[CodeRule, ...]
    markers: tuple[Marker, ...]
    marker_any: re.Pattern[str] | None  # the markers without hints, in one search (None: every one has hints)
    marker_hints: re.Pattern[str] | None  # the hints of the markers left out of marker_any
    load_bars: tuple[str, ...]
    train_bar_words: frozenset[str]
    eval_bar_words: frozenset[str]
    train_bar_forms: tuple[re.Pattern[str], ...]  # descriptions of a training loop's bar (torchtune's)
    data_bars: tuple[str, ...]  # starts of the descriptions of dataset-preparation bars, lower case
    allocator_warnings: tuple[AllocatorWarning, ...]
    allocator_any: re.Pattern[str]
    save_step_multiples: tuple[int, ...]
    card_patterns: tuple[re.Pattern[str], ...]
    card_hint: re.Pattern[str]
    zero_stage_files: tuple[tuple[str, int], ...]
    zero_stage_code: tuple[tuple[str, int], ...]
    zero_stage_lines: tuple[re.Pattern[str], ...]
    zero_stage_any: re.Pattern[str]
    output_dir_logs: tuple[str, ...]
    trainer_log: str
    step_counters: tuple[re.Pattern[str], ...] = ()  # other trainers' step lines: groups n (done) and total
    step_counter_any: re.Pattern[str] | None = None
    step_counter_hints: re.Pattern[str] | None = None  # a line holds none: no step line (None: no pre-check)
    step_counter_entry_hints: tuple[tuple[str, ...], ...] = ()  # each entry's own (empty: try it on any line)
    early_steps: int = 0  # completed steps up to which an OOM's phase is asked (first_batch or long_sample)
    # (method pattern, phase, why) of the task a Ray memory monitor kill names
    ray_task_phases: tuple[tuple[re.Pattern[str], str, Text], ...] = ()
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


def _why(entry: dict[str, Any]) -> Text:
    why = entry.get("why") or {}
    return Text(en=str(why.get("en", "")), zh=str(why.get("zh", why.get("en", ""))))


_NAMED_GROUP = lazy(r"[(][?]P<[A-Za-z_]\w*>")


# A pre-check's words are cut to this many characters: a line holding a word holds its start too, the entries'
# own tests follow, and a shorter alternation compiles faster (the markers' hints: 0.9 -> 0.7 ms).
_PRE_CHECK_CHARS = 16


def _literals(words: list[str]) -> re.Pattern[str] | None:
    """One search for any of these plain substrings, each cut to its start (None: none). A word holding
    another is left out: the shorter one finds every line the longer one would."""
    cut = {w[:_PRE_CHECK_CHARS] for w in words}
    kept = sorted(w for w in cut if not any(o in w and o != w for o in cut))
    return lazy("|".join(re.escape(w) for w in kept)) if kept else None


def _any_of_or_none(patterns: list[str]) -> re.Pattern[str] | None:
    return _any_of(patterns) if patterns else None


def _any_of(patterns: list[str]) -> re.Pattern[str]:
    """One regex that finds a line worth the per-entry regexes (named groups dropped: they repeat)."""
    return lazy("|".join(f"(?:{_NAMED_GROUP.sub('(?:', p)})" for p in patterns))


@functools.lru_cache(maxsize=1)
def markers_raw() -> dict[str, Any]:
    """log_markers.yaml as parsed, read once per process: the tables below and the rarer readers' own sections
    (log_child, log_gather, log_data_parallel, log_host_report) all take it from here."""
    raw: dict[str, Any] = load_data_file(MARKERS_FILE)
    return raw


@functools.lru_cache(maxsize=1)
def tables() -> Tables:
    """Load and compile log_markers.yaml (once per process)."""
    raw = markers_raw()
    forms = _oom_forms(raw)
    # longest first; ties by text, so the pattern is the same text in every process (its compiled form is cached)
    hints = sorted({h for f in forms for h in f.hints}, key=lambda h: (-len(h), h))
    return Tables(
        oom_forms=forms,
        oom_hint=lazy("|".join(re.escape(h) for h in hints)),
        library_kinds=tuple((k["kind"], tuple(k["files"])) for k in raw["library_kinds"]),
        run_start=_any_of(raw["run_start"]),
        frames=_frame_rules(raw),
        code=tuple(
            CodeRule(
                role=c["role"],
                phase=c.get("phase"),
                contains=tuple(c["contains"]),
                why=_why(c),
                setup_step=c.get("setup_step"),
                over_frame=bool(c.get("over_frame", False)),
            )
            for c in raw["code"]
        ),
        markers=_markers(raw),
        # a marker with a `hint` is tried only on lines holding one of its hints (rare lines: kept out of the
        # combined search every line pays for)
        marker_any=_any_of_or_none([m["pattern"] for m in raw["markers"] if not m.get("hint")]),
        marker_hints=_literals([h for m in raw["markers"] for h in m.get("hint") or ()]),
        allocator_warnings=tuple(
            AllocatorWarning(lazy(w["pattern"]), w.get("count")) for w in raw["allocator_warnings"]
        ),
        allocator_any=_any_of([w["pattern"] for w in raw["allocator_warnings"]]),
        save_step_multiples=tuple(int(x) for x in raw["save_step_multiples"]),
        card_patterns=tuple(lazy(c["pattern"]) for c in raw["card_names"]["forms"]),
        card_hint=lazy("|".join(re.escape(h) for h in raw["card_names"]["hint"])),
        output_dir_logs=tuple(raw["output_dir_logs"]),
        trainer_log=str(raw["trainer_log"]),
        early_steps=int(raw.get("early_steps") or 0),
        raw=raw,
        **_progress_tables(raw),
        **_zero_stage_tables(raw),
    )


def _oom_forms(raw: dict[str, Any]) -> tuple[OomForm, ...]:
    return tuple(
        OomForm(
            kind=f["kind"],
            ran_out_of=f["ran_out_of"],
            priority=int(f["priority"]),
            pattern=lazy(f["pattern"]),
            hints=tuple(f["hint"]),
            only_without_error=bool(f.get("only_without_error", False)),
        )
        for f in raw["oom_forms"]
    )


def _frame_rules(raw: dict[str, Any]) -> tuple[FrameRule, ...]:
    return tuple(
        FrameRule(
            role=f["role"],
            phase=f.get("phase"),
            functions=frozenset(f.get("functions") or ()),
            files=tuple(f.get("files") or ()),
            why=_why(f),
            setup_step=f.get("setup_step"),
        )
        for f in raw["frames"]
    )


def _markers(raw: dict[str, Any]) -> tuple[Marker, ...]:
    return tuple(
        Marker(
            context=m.get("context"),
            setup=bool(m.get("setup", False)),
            pattern=lazy(m["pattern"]),
            why=_why(m),
            after=m.get("after"),
            warns=bool(m.get("warns", False)),
            sharding=m.get("sharding"),
            in_step=bool(m.get("in_step", False)),
            launch=bool(m.get("launch", False)),
            owns_bars=bool(m.get("owns_bars", False)),
            export=bool(m.get("export", False)),
            resume=bool(m.get("resume", False)),
            hints=tuple(m.get("hint") or ()),
        )
        for m in raw["markers"]
    )


def _progress_tables(raw: dict[str, Any]) -> dict[str, Any]:
    """The bars' and step lines' tables (Tables fields)."""
    counters = raw.get("step_counters") or []
    return {
        "load_bars": tuple(raw["load_bars"]),
        "train_bar_words": frozenset(str(w).lower() for w in raw["train_bar_words"]),
        "eval_bar_words": frozenset(str(w).lower() for w in raw["eval_bar_words"]),
        "train_bar_forms": tuple(lazy(f["pattern"]) for f in raw.get("train_bar_forms") or ()),
        "data_bars": tuple(str(b).lower() for b in raw.get("data_bars") or ()),
        "ray_task_phases": tuple(
            (lazy(r["method"]), str(r["phase"]), _why(r)) for r in raw.get("ray_task_phases") or ()
        ),
        "step_counters": tuple(lazy(c["pattern"]) for c in counters),
        "step_counter_any": _any_of([c["pattern"] for c in counters]) if counters else None,
        "step_counter_hints": (
            _literals([h for c in counters for h in c["hint"]])
            if all(c.get("hint") for c in counters)
            else None
        ),
        "step_counter_entry_hints": tuple(tuple(c.get("hint") or ()) for c in counters),
    }


def _zero_stage_tables(raw: dict[str, Any]) -> dict[str, Any]:
    """The ZeRO stage's tables (Tables fields)."""
    zero = raw["zero_stage"]
    return {
        "zero_stage_files": tuple((z["contains"], int(z["stage"])) for z in zero["files"]),
        "zero_stage_code": tuple((z["contains"], int(z["stage"])) for z in zero["code"]),
        "zero_stage_lines": tuple(lazy(z["pattern"]) for z in zero["lines"]),
        "zero_stage_any": _any_of([z["pattern"] for z in zero["lines"]]),
    }
