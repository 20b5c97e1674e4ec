"""Compare trials side by side, or review two configs before running anything.

``compare_trials`` reads only the trial folders (``result.json``, ``config.yaml``, ``change.json``,
``gpu-samples.csv``) and builds the course's table: peak sampled memory in MiB and GiB, wall time of the
whole command, outcome, steps, eval loss, and the difference to the first trial ("-6,358 MiB (-6.21 GiB),
+259.73 s"). It warns when two trials cannot be compared (other data, model, precision or card).

``compare_configs`` says, for each field that differs, what the change does to memory and what it risks
(knowledge in ``field_effects.yaml``), and warns when more than one thing changed at once.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from oomdoctor import inputs
from oomdoctor.errors import BadInput, one_line
from oomdoctor.facts.types import to_jsonable
from oomdoctor.i18n import Lang, both, msg, pick
from oomdoctor.report import units
from oomdoctor.report.table import table as _table
from oomdoctor.text import Text
from oomdoctor.trial.folder import TrialFolder

_EFFECTS_FILE = Path(__file__).with_name("field_effects.yaml")
MEMORY_EFFECTS = ("less", "more", "none", "depends", "unknown")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

LocalText = Text


@functools.lru_cache(maxsize=1)
def field_effects() -> dict[str, Any]:
    """The parsed ``field_effects.yaml`` (validated: every risk and memory value is known)."""
    with _EFFECTS_FILE.open(encoding="utf-8") as f:
        data: dict[str, Any] = yaml.safe_load(f)
    risks = data["risks"]
    for name, text in risks.items():
        _check_text(text, f"risks.{name}")
    for name, spec in data["fields"].items():
        _check_text(spec.get("label"), f"{name}.label")
        for direction, effect in _effects_of(spec):
            if "note" in effect:
                _check_text(effect["note"], f"{name}.{direction}.note")
            if effect.get("memory") not in MEMORY_EFFECTS:
                raise ValueError(
                    f"{_EFFECTS_FILE.name}: {name}.{direction}: memory must be one of {MEMORY_EFFECTS}"
                )
            for risk in effect.get("risks", []):
                if risk not in risks:
                    raise ValueError(f"{_EFFECTS_FILE.name}: {name}.{direction}: unknown risk {risk!r}")
    return data


def _check_text(text: Any, where: str) -> None:
    """Both languages, nothing else: a stray comma in a YAML flow mapping would split a text silently."""
    if (
        not isinstance(text, dict)
        or set(text) != {"en", "zh"}
        or not all(isinstance(v, str) and v for v in text.values())
    ):
        raise ValueError(f"{_EFFECTS_FILE.name}: {where} must be {{en: ..., zh: ...}}, got {text!r}")


def _effects_of(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = [
        (d, spec[d]) for d in ("down", "up", "on", "off", "set", "removed", "changed") if d in spec
    ]
    found += [(f"to.{value}", effect) for value, effect in (spec.get("to") or {}).items()]
    return found


# --- Config review -------------------------------------------------------------------------------------------


@dataclass
class FieldChange:
    """One field that differs, with what the change does."""

    field: str
    old: Any
    new: Any
    direction: str  # down / up / on / off / set / removed / changed
    memory: str  # less / more / none / depends / unknown
    label: LocalText
    risks: list[str] = dataclasses.field(default_factory=list)
    risk_texts: list[LocalText] = dataclasses.field(default_factory=list)
    note: LocalText | None = None
    bookkeeping: bool = False
    paired_with: str | None = None  # the field it forms one change with (batch + accumulation)

    @property
    def targets_memory(self) -> bool:
        return self.memory == "less" and not {"samples_cut", "different_training"} & set(self.risks)


@dataclass
class ConfigReview:
    old: str
    new: str
    changes: list[FieldChange]
    warnings: list[LocalText] = field(default_factory=list)

    @property
    def things_changed(self) -> list[str]:
        """Fields that count as separate changes (bookkeeping and paired fields folded away)."""
        return [c.field for c in self.changes if not c.bookkeeping and c.paired_with is None]

    @property
    def targets_memory(self) -> list[str]:
        return [c.field for c in self.changes if c.targets_memory and not c.bookkeeping]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = to_jsonable(self)
        for item, change in zip(out["changes"], self.changes, strict=True):
            item["targets_memory"] = change.targets_memory
        out["things_changed"] = self.things_changed
        out["targets_memory"] = self.targets_memory
        return out

    def render(self, lang: Lang) -> str:
        lines = [msg("cmp_review_title", lang, old=self.old, new=self.new), ""]
        if not self.changes:
            lines.append(msg("cmp_no_changes", lang))
        rows = []
        for c in self.changes:
            rows.append(
                [
                    c.field,
                    f"{_value(c.old)} -> {_value(c.new)}",
                    msg(f"cmp_memory_{c.memory}", lang),
                    "; ".join(pick(t, lang) for t in c.risk_texts) or "-",
                ]
            )
        if rows:
            headers = [msg(k, lang) for k in ("cmp_h_field", "cmp_h_change", "cmp_h_memory", "cmp_h_risks")]
            lines += _table(headers, rows)
            notes = [f"  {c.field}: {pick(c.note, lang)}" for c in self.changes if c.note]
            if notes:
                lines += ["", *notes]
        if self.warnings:
            lines += ["", msg("cmp_warnings", lang)]
            lines += [f"  ! {pick(w, lang)}" for w in self.warnings]
        return "\n".join(lines)


def _coerce(value: Any) -> Any:
    """WebUI files write numbers and switches as strings; compare them as what they mean."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        if _NUMBER.fullmatch(text):
            number = float(text)
            return (
                int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
            )
        return text
    return value


def _effective(raw: dict[str, Any], key: str, spec: dict[str, Any], defaults: dict[str, Any]) -> Any:
    value = _coerce(raw[key]) if key in raw else defaults.get(key)
    if value in spec.get("unset", []) or value == "":
        return None
    return value


def _direction(old: Any, new: Any) -> str:
    if isinstance(old, bool) or isinstance(new, bool):
        if isinstance(old, bool | None) and isinstance(new, bool | None):
            return "on" if new else "off"
        return "changed"
    if old is None:
        return "set"
    if new is None:
        return "removed"
    if isinstance(old, int | float) and isinstance(new, int | float):
        return "up" if new > old else "down"
    return "changed"


def _field_change(key: str, old: Any, new: Any, spec: dict[str, Any], risks: dict[str, Any]) -> FieldChange:
    direction = _direction(old, new)
    effect = (spec.get("to") or {}).get(str(new)) if direction not in ("on", "off") else None
    if effect is None:
        effect = spec.get(direction) or spec.get("changed")
    if effect is None and direction in ("set", "removed", "up", "down"):
        effect = spec.get("changed")
    effect = effect or {"memory": "unknown", "risks": []}
    return FieldChange(
        field=key,
        old=old,
        new=new,
        direction=direction,
        memory=effect["memory"],
        label=Text.of(spec.get("label") or {"en": key, "zh": key}),
        risks=list(effect.get("risks", [])),
        risk_texts=[Text.of(risks[r]) for r in effect.get("risks", [])],
        note=Text.of(effect["note"]) if effect.get("note") else None,
        bookkeeping=bool(spec.get("bookkeeping")),
    )


def _load_mapping(path: str | os.PathLike[str]) -> dict[str, Any]:
    from oomdoctor.facts.config import load_yaml_mapping

    return load_yaml_mapping(path)


def review_mappings(old_raw: dict[str, Any], new_raw: dict[str, Any], *, old: str = "old", new: str = "new",
                    ignore: tuple[str, ...] = ()) -> ConfigReview:  # fmt: skip
    """The review of two already-loaded configs (``ignore``: fields not worth listing, e.g. trial settings)."""
    from oomdoctor.facts.config import lf_defaults

    effects = field_effects()
    defaults = lf_defaults()
    changes: list[FieldChange] = []
    for key in list(old_raw) + [k for k in new_raw if k not in old_raw]:
        if key in ignore:
            continue
        if key in old_raw and key in new_raw and old_raw[key] == new_raw[key]:
            continue
        spec = effects["fields"].get(key, {})
        before = _effective(old_raw, key, spec, defaults)
        after = _effective(new_raw, key, spec, defaults)
        if before == after:
            continue
        changes.append(_field_change(key, before, after, spec, effects["risks"]))
    _pair_changes(changes, effects["fields"])
    review = ConfigReview(old=old, new=new, changes=changes)
    review.warnings = _review_warnings(review)
    return review


def _pair_changes(changes: list[FieldChange], specs: dict[str, Any]) -> None:
    """Batch halved with accumulation doubled is one change: mark the second field as paired."""
    by_field = {c.field: c for c in changes}
    for change in changes:
        partner_name = (specs.get(change.field) or {}).get("keeps_product_with")
        partner = by_field.get(partner_name) if partner_name else None
        if partner is None:
            continue
        numbers = (change.old, change.new, partner.old, partner.new)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
            continue
        if math.isclose(change.old * partner.old, change.new * partner.new):
            change.paired_with = partner.field
            change.note = both("cmp_keeps_effective_batch", partner=partner.field,
                               before=_value(change.old * partner.old))  # fmt: skip
            change.risks = [r for r in change.risks if r != "different_training"]
            change.risk_texts = [Text.of(field_effects()["risks"][r]) for r in change.risks]


def _review_warnings(review: ConfigReview) -> list[LocalText]:
    warnings: list[LocalText] = []
    things = review.things_changed
    if len(things) > 1:
        targets = review.targets_memory
        warnings.append(both("cmp_many_changes", count=len(things), fields=", ".join(things)))
        if targets:
            warnings.append(both("cmp_only_targets", fields=", ".join(targets)))
        else:
            warnings.append(both("cmp_none_targets"))
        for c in review.changes:
            if c.bookkeeping or c.paired_with:
                continue
            if c.memory == "more":
                warnings.append(both("cmp_adds_memory", field=c.field))
            elif "samples_cut" in c.risks:
                warnings.append(both("cmp_cuts_samples", field=c.field))
            elif "different_training" in c.risks and c.memory in ("none", "depends"):
                warnings.append(both("cmp_changes_training", field=c.field))
    return warnings


def compare_configs(old: str | os.PathLike[str], new: str | os.PathLike[str]) -> ConfigReview:
    """``oomdoctor compare OLD.yaml NEW.yaml``: each changed field with its memory effect and risks."""
    return review_mappings(_checked_mapping(old), _checked_mapping(new), old=str(old), new=str(new))


def _checked_mapping(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The config as a mapping, after the config reader has accepted every value in it (a batch size of
    "four" or 10**30 is refused here as it would be by diagnose and by LLaMA-Factory)."""
    from oomdoctor.facts.config import config_from_mapping

    raw = _load_mapping(path)
    p = Path(path).expanduser()
    config_from_mapping(raw, path=str(p), base_dir=p.resolve().parent)
    return raw


# --- Trials -----------------------------------------------------------------------------------------------------


@dataclass
class TrialRow:
    name: str
    folder: str
    outcome: str
    peak_mib: float | None
    peak_source: str | None
    wall_s: float | None
    steps_done: int | None
    total_steps: int | None
    eval_loss: float | None
    exit_code: int | None = None
    phase: str | None = None
    alloc_warnings: int = 0
    checkpoints: list[str] = field(default_factory=list)
    delta_peak_mib: float | None = None
    delta_wall_s: float | None = None
    change: dict[str, Any] | None = None  # change.json: rule, title, changes
    config_changes: list[FieldChange] = field(default_factory=list)  # vs the first trial's config.yaml
    facts: dict[str, Any] = field(default_factory=dict)  # comparability facts from result.json
    milestones: list[dict[str, Any]] = field(default_factory=list)  # a probe's milestones (result.json)

    @property
    def peak_gib(self) -> float | None:
        return None if self.peak_mib is None else self.peak_mib / 1024


@dataclass(frozen=True)
class ComparisonWarning:
    """One warning under the comparison table: its kind (``many_changes``, ``unknown_data``,
    ``not_comparable``: the last makes the trials not comparable) and its text."""

    kind: str
    text: Text

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, **self.text.as_dict()}


@dataclass
class Comparison:
    rows: list[TrialRow]
    warnings: list[ComparisonWarning] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        return not any(w.kind == "not_comparable" for w in self.warnings)

    def to_json(self) -> dict[str, Any]:
        trials = []
        for row in self.rows:
            item = to_jsonable(row)
            item["peak_gib"] = None if row.peak_gib is None else round(row.peak_gib, 2)
            item["difference"] = (
                both("cmp_delta", **_delta_fields(row)).as_dict() if row.delta_peak_mib is not None else None
            )
            trials.append(item)
        warnings = [w.to_json() for w in self.warnings]
        return {"trials": trials, "comparable": self.comparable, "warnings": warnings}

    def render(self, lang: Lang) -> str:
        headers = [msg(k, lang) for k in ("cmp_h_trial", "cmp_h_peak_mib", "cmp_h_peak_gib", "cmp_h_wall",
                                           "cmp_h_outcome", "cmp_h_steps", "cmp_h_eval_loss", "cmp_h_delta")]  # fmt: skip
        rows = []
        for i, row in enumerate(self.rows):
            rows.append(
                [
                    row.name,
                    units.mib(row.peak_mib, unit=False),
                    units.gib(row.peak_mib, unit=False),
                    units.number(row.wall_s, 2),
                    outcome_text(row, lang),
                    f"{row.steps_done if row.steps_done is not None else '-'}/{row.total_steps or '-'}",
                    "-" if row.eval_loss is None else f"{row.eval_loss:.4g}",
                    msg("cmp_first", lang) if i == 0 else _delta_text(row, lang),
                ]
            )
        sources = {r.peak_source for r in self.rows if r.peak_source}
        note_key = "cmp_peak_note_host" if sources == {"host_rss"} else "cmp_peak_note"
        lines = [msg("cmp_trials_title", lang), *_table(headers, rows), "", msg(note_key, lang)]
        changed = [r for r in self.rows[1:] if r.change or r.config_changes]
        if changed:
            lines += ["", msg("cmp_what_changed", lang)]
            for row in changed:
                lines.append(f"  {row.name} vs {self.rows[0].name}: " + _change_summary(row, lang))
        lines += _milestone_table(self.rows, lang)
        if self.warnings:
            lines += ["", msg("cmp_warnings", lang)]
            lines += [f"  ! {w.text.pick(lang)}" for w in self.warnings]
        return "\n".join(lines)


def _milestone_cell(mark: dict[str, Any] | None) -> str:
    if mark is None or mark.get("passed") is None:
        return "n/a"
    if mark.get("passed"):
        return units.mib(mark.get("peak_mib"), unit=False)
    return f"x {units.mib(mark.get('peak_mib'), unit=False)}" if mark.get("reached") else "-"


def _milestone_table(rows: list[TrialRow], lang: Lang) -> list[str]:
    """The probes' milestones side by side: the peak up to each one passed."""
    probes = [r for r in rows if r.milestones]
    if not probes:
        return []
    names = [m["name"] for m in probes[0].milestones]
    headers = [msg("cmp_h_trial", lang), *(msg(f"milestone_short_{n}", lang) for n in names)]
    table = []
    for row in probes:
        marks = {m.get("name"): m for m in row.milestones}
        table.append([row.name, *(_milestone_cell(marks.get(n)) for n in names)])
    return ["", msg("cmp_milestones", lang), *_table(headers, table)]


def _delta_fields(row: TrialRow) -> dict[str, str]:
    mib = row.delta_peak_mib or 0.0
    wall = row.delta_wall_s
    return {
        "mib": units.mib(mib, unit=False, signed=True),
        "gib": units.gib(mib, unit=False, signed=True),
        "wall": units.number(wall, 2, signed=True),
    }


def _delta_text(row: TrialRow, lang: Lang) -> str:
    if row.delta_peak_mib is None and row.delta_wall_s is None:
        return "-"
    if row.delta_peak_mib is None:
        return units.seconds(row.delta_wall_s, signed=True)
    text = msg("cmp_delta", lang, **_delta_fields(row))
    if row.delta_peak_mib < 0 and row.outcome != "ok":  # a run that stopped early peaked lower: no saving
        text += " " + msg("cmp_failed_not_saving", lang)
    return text


def outcome_text(row: TrialRow, lang: Lang) -> str:
    """The course's "运行结果" column: how it ended, warnings seen, what was saved."""
    if row.outcome == "oom":
        phase = msg(f"phase_{row.phase}", lang) if row.phase and f"phase_{row.phase}" in _messages() else "?"
        text = msg("cmp_outcome_oom", lang, phase=phase)
    elif row.outcome == "timed_out":
        text = msg("cmp_outcome_timed_out", lang)
    elif row.outcome == "stopped":
        text = msg("cmp_outcome_stopped", lang)
    elif row.outcome == "failed":
        text = msg("cmp_outcome_failed", lang, code=row.exit_code)
    else:
        text = msg("cmp_outcome_ok", lang)
        if row.alloc_warnings:
            text = msg("cmp_outcome_ok_warned", lang, count=row.alloc_warnings)
    if row.checkpoints:
        text += msg("cmp_saved", lang, name=row.checkpoints[-1])
    return text


def _messages() -> Mapping[str, Any]:
    from oomdoctor.i18n import MESSAGES

    return MESSAGES


def _change_summary(row: TrialRow, lang: Lang) -> str:
    parts = [f"{c.field} {_value(c.old)} -> {_value(c.new)}" for c in row.config_changes]
    text = ", ".join(parts) if parts else msg("cmp_no_config_change", lang)
    if row.change:
        rule = row.change.get("rule")
        title = row.change.get("title")
        if rule or title:
            text += f"  ({rule or ''}{': ' if rule and title else ''}{pick(title, lang) if title else ''})"
    return text


# The keys a trial itself sets (trial/runner.py): they differ between trials only in bookkeeping.
TRIAL_KEYS = ("output_dir", "logging_steps", "save_steps", "eval_steps", "report_to")


def _peak_from_samples(folder: Path) -> tuple[float | None, str | None]:
    """The highest sampled memory in ``gpu-samples.csv``, streamed (a line and a row budget, see
    ``inputs.iter_csv_rows``); (None, None) when there is no such file. BadInput for a hostile one."""
    path = TrialFolder(folder).samples
    if not path.exists() and not path.is_symlink():
        return None, None
    shown = one_line(path)
    rows = inputs.iter_csv_rows(path, what="gpu-samples.csv")
    header = next(rows, [])
    if "memory_used_mib" not in header or "gpu" not in header:
        if not header:
            return None, None  # empty: the trial was stopped before its first sample
        raise inputs.bad_value(shown, "header", "time_s,gpu,memory_used_mib,...", ",".join(header)[:60])
    used, gpu = header.index("memory_used_mib"), header.index("gpu")
    peak: float | None = None
    all_host = True
    for number, row in enumerate(rows, start=2):
        value = _sample_mib(row[used] if used < len(row) else None, shown, number)
        peak = value if peak is None else max(peak, value)
        all_host = all_host and gpu < len(row) and row[gpu] == "host"
    if peak is None:
        return None, None
    return peak, "host_rss" if all_host else "nvml"


def _sample_mib(text: str | None, shown: str, line: int) -> float:
    try:
        value = float(text) if text is not None and len(text) <= 40 else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= inputs.MAX_NUMBER):
        raise inputs.bad_value(shown, f"line {line} memory_used_mib", "a number of MiB", text)
    return value


def _read_change(folder: Path) -> dict[str, Any] | None:
    """What ``change.json`` says about the change tried, its fields type-checked; None when there is none."""
    path = TrialFolder(folder).change
    if not path.exists() and not path.is_symlink():
        return None
    shown = one_line(path)
    change = inputs.read_json_object(path, what="change.json")
    title = change.get("title")
    if title is not None and not isinstance(title, str | dict):
        raise inputs.bad_value(shown, "title", "a text or a {en, zh} mapping", title)
    if isinstance(title, dict):
        title = {str(k): str(v) for k, v in title.items() if isinstance(v, str)}
    return {
        "rule": inputs.optional_text(change, "rule", path=shown),
        "title": title,
        "changes": inputs.optional_mapping(change, "changes", path=shown),
        "parent": inputs.optional_text(change, "parent", path=shown),
    }


def _read_trial_config(folder: Path) -> dict[str, Any] | None:
    path = TrialFolder(folder).config
    if not path.exists() and not path.is_symlink():
        return None
    return inputs.read_yaml_mapping(path)


def _result_fields(result: dict[str, Any], shown: str) -> dict[str, Any]:
    """The fields of ``result.json`` that the table shows, each type- and range-checked (BadInput naming the
    file and the key): a half-written or hand-edited result must not reach arithmetic as a string."""
    num = functools.partial(inputs.optional_number, result, path=shown)
    count = functools.partial(inputs.optional_int, result, path=shown, low=0)
    text = functools.partial(inputs.optional_text, result, path=shown)
    warnings = inputs.optional_list(result, "warnings", path=shown) or []
    checkpoints = inputs.optional_list(result, "checkpoints", path=shown) or []
    if not all(isinstance(c, str) for c in checkpoints):
        raise inputs.bad_value(shown, "checkpoints", "a list of folder names", checkpoints)
    fields: dict[str, Any] = {
        "outcome": text("outcome"),
        "peak_memory_mib": num("peak_memory_mib", low=0.0),
        "peak_source": text("peak_source"),
        "wall_s": num("wall_s", low=0.0),
        "steps_done": count("steps_done"),
        "total_steps": count("total_steps"),
        "steps_requested": count("steps_requested"),
        "eval_loss": num("eval_loss"),
        "exit_code": inputs.optional_int(result, "exit_code", path=shown, low=-255, high=255),
        "phase": text("phase"),
        "alloc_retries": count("alloc_retries"),
        "warnings": warnings,
        "checkpoints": checkpoints,
        "milestones": inputs.optional_list(result, "milestones", path=shown) or [],
    }
    for key in ("dataset_fingerprint", "model_name_or_path", "precision", "gpu_name"):
        fields[key] = text(key)
    return fields


def _read_trial(folder: Path) -> tuple[TrialRow, dict[str, Any] | None]:
    files = TrialFolder(folder)
    result_path = files.result
    if not folder.is_dir() or not (result_path.exists() or result_path.is_symlink()):
        raise BadInput(msg("cmp_not_a_trial", None, path=one_line(folder)))
    shown = one_line(result_path)
    result = _result_fields(inputs.read_json_object(result_path, what="result.json"), shown)
    change = _read_change(folder)
    config = _read_trial_config(folder)
    peak, source = result["peak_memory_mib"], result["peak_source"]
    if peak is None:
        peak, source = _peak_from_samples(folder)
    row = TrialRow(
        name=folder.name,
        folder=str(folder),
        outcome=result["outcome"] or ("ok" if result["exit_code"] == 0 else "failed"),
        peak_mib=peak,
        peak_source=source,
        wall_s=result["wall_s"],
        steps_done=result["steps_done"],
        total_steps=result["total_steps"] or result["steps_requested"],
        eval_loss=result["eval_loss"],
        exit_code=result["exit_code"],
        phase=result["phase"],
        alloc_warnings=max(result["alloc_retries"] or 0, len(result["warnings"])),
        checkpoints=list(result["checkpoints"]),
        change=change,
        milestones=[m for m in result["milestones"] if isinstance(m, dict) and "name" in m],
        facts={
            k: result[k]
            for k in (
                "dataset_fingerprint",
                "model_name_or_path",
                "precision",
                "gpu_name",
                "peak_source",
                "steps_requested",
            )
        },  # fmt: skip
    )
    return row, config


_COMPARABILITY = (
    ("dataset_fingerprint", "cmp_other_data"),
    ("model_name_or_path", "cmp_other_model"),
    ("precision", "cmp_other_precision"),
    ("gpu_name", "cmp_other_gpu"),
    ("peak_source", "cmp_other_source"),
    ("steps_requested", "cmp_other_steps"),
)


def distinct_names(folders: list[Path]) -> list[str]:
    """For each trial, the shortest trailing part of its path that no other trial shares, and at least
    `<change>/<trial>` for a trial inside an `oomdoctor patch` folder: the last part alone ("run", "run")
    would not say which change it tried."""
    parts = [Path(os.path.abspath(f)).parts for f in folders]

    def tail(p: tuple[str, ...], depth: int) -> str:
        return "/".join(p[-depth:])

    names = []
    for i, mine in enumerate(parts):
        others = [p for j, p in enumerate(parts) if j != i]
        # a trial inside a patch folder is named with the change it tried: "01-halve-batch/run"
        depth = 2 if TrialFolder(Path(folders[i]).absolute().parent).change.is_file() else 1
        while depth < len(mine) and any(tail(o, depth) == tail(mine, depth) for o in others):
            depth += 1
        names.append(tail(mine, depth) if depth < len(mine) else os.path.abspath(folders[i]))
    return names


def compare_trials(dirs: list[Path] | list[str]) -> Comparison:
    """The course's comparison of trial folders; the first one is the reference for the differences."""
    if len(dirs) < 1:
        raise BadInput(msg("cmp_need_trials", None))
    loaded = [_read_trial(Path(d)) for d in dirs]
    rows = [row for row, _ in loaded]
    for row, name in zip(rows, distinct_names([Path(d) for d in dirs]), strict=True):
        row.name = name
    first, first_config = loaded[0]
    warnings: list[ComparisonWarning] = []
    for row, config in loaded[1:]:
        _set_deltas(first, row)
        warnings += _config_review(first, first_config, row, config)
        warnings += _comparability_warnings(first, row)
    return Comparison(rows=rows, warnings=warnings)


def _set_deltas(first: TrialRow, row: TrialRow) -> None:
    """The peak and the wall time of ``row`` against the first trial's, where both are known."""
    if first.peak_mib is not None and row.peak_mib is not None:
        row.delta_peak_mib = round(row.peak_mib - first.peak_mib, 1)
    if first.wall_s is not None and row.wall_s is not None:
        row.delta_wall_s = round(row.wall_s - first.wall_s, 2)


def _config_review(
    first: TrialRow, first_config: dict[str, Any] | None, row: TrialRow, config: dict[str, Any] | None
) -> list[ComparisonWarning]:
    """Set ``row``'s config changes against the first trial's config; warn when more than one thing changed
    (the difference can then not be put down to one of them)."""
    if first_config is None or config is None:
        return []
    review = review_mappings(first_config, config, old=first.name, new=row.name, ignore=TRIAL_KEYS)
    row.config_changes = review.changes
    if len(review.things_changed) <= 1:
        return []
    fields = ", ".join(review.things_changed)
    text = both("cmp_trial_many_changes", trial=row.name, first=first.name, fields=fields)
    return [ComparisonWarning("many_changes", text)]


def _comparability_warnings(first: TrialRow, row: TrialRow) -> list[ComparisonWarning]:
    """What the two trials do not share (model, card, data, ...), except the precision when it is the
    change under test; unknown data is said once as such."""
    warnings: list[ComparisonWarning] = []
    for key, message in _COMPARABILITY:
        a, b = first.facts.get(key), row.facts.get(key)
        if key == "dataset_fingerprint" and "unknown" in (a, b):
            if a != b or a == "unknown":
                warnings.append(ComparisonWarning("unknown_data", both("cmp_unknown_data", trial=row.name)))
            continue
        if a != b:
            changed = {c.field for c in row.config_changes}
            if key == "precision" and changed & {"fp16", "bf16", "pure_bf16"}:
                continue  # precision is the change under test
            text = both(message, trial=row.name, first=first.name, a=_value(a), b=_value(b))
            warnings.append(ComparisonWarning("not_comparable", text))
    return warnings


# --- Text helpers ----------------------------------------------------------------------------------------------


def _value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
