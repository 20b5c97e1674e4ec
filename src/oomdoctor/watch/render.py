"""A run frame as text for a terminal, in the user's language (``watch --config`` without ``--json``)."""

from __future__ import annotations

from typing import Any

from oomdoctor.i18n import Lang, msg
from oomdoctor.report.units import duration as _eta
from oomdoctor.report.units import meter as _bar
from oomdoctor.report.units import number as _num


def _pool_lines(pool: dict[str, Any], lang: Lang) -> list[str]:
    source = msg(f"wr_limit_{pool['limit_source']}", lang)
    if pool["used_mib"] is None:  # the estimate alone (log without memory readings)
        lines = [
            f"{pool['name']}  {source}",
            "  " + msg("wr_estimate_only", lang, limit=_num(pool["limit_mib"])),
        ]
    else:
        lines = _reading_lines(pool, source, lang)
    phase = pool.get("phase_lines_mib") or {}
    if phase:
        lines.append("  " + msg("wr_phase_lines", lang, eval=_num(phase.get("eval")), batch=_num(phase.get("longest_batch")),
                                  save=_num(phase.get("save"))))  # fmt: skip
    return lines


def _reading_lines(pool: dict[str, Any], source: str, lang: Lang) -> list[str]:
    return [
        f"{pool['name']}  {source}",
        f"  {_bar(pool['used_mib'], pool['limit_mib'])} "
        + msg("wr_pool", lang, used=_num(pool["used_mib"]), limit=_num(pool["limit_mib"]),
              peak=_num(pool["peak_mib"]), left=_num(pool["left_mib"])),
    ]  # fmt: skip


def has_readings(frame: dict[str, Any]) -> bool:
    """Some memory of the run was read (not only the estimate's levels): warnings can be judged."""
    return any(pool["used_mib"] is not None for pool in frame["pools"])


def render_run_frame(frame: dict[str, Any], final: Any, lang: Lang) -> str:
    """The frame as text; ``final`` is the Diagnosis once the run has ended."""
    lines = [msg("wr_title", lang, time=frame["time"], config=frame["config"]), ""]
    lines += _run_lines(frame, lang)
    lines.append("")
    for pool in frame["pools"]:
        lines += _pool_lines(pool, lang)
    lines.append("")
    lines += _warning_lines(frame, lang)
    lines += _end_lines(frame, final, lang)
    return "\n".join(lines)


def _run_lines(frame: dict[str, Any], lang: Lang) -> list[str]:
    """The run's processes, step, loss and time left, the next eval and save, and whether only its log is
    followed; or that it has not started yet."""
    if not frame["alive"]:
        return [] if frame["ended"] else [msg("wr_waiting", lang)]
    lines = [
        msg("wr_run", lang, pids=", ".join(map(str, frame["pids"])) or "-", step=_num(frame["step"]),
            total=_num(frame["total_steps"]), loss=_num(frame["loss"], 4), eta=_eta(frame["eta_s"])),
        msg("wr_next", lang, eval=_num(frame["next_eval_step"]), save=_num(frame["next_save_step"])),
    ]  # fmt: skip
    if frame.get("log_only"):
        lines.append(msg("wr_log_only", lang, file=frame["log_file"] or "-", age=_num(frame["log_age_s"])))
    return lines


def _warning_lines(frame: dict[str, Any], lang: Lang) -> list[str]:
    """The warnings with what to do about each (or that there are none, while the run is alive), and the
    first warning the run gave."""
    lines: list[str] = []
    if frame["warnings"]:
        lines.append(msg("wr_warnings", lang))
        for w in frame["warnings"]:
            lines += [f"  ! {w['text'][lang]}", f"    {w['act'][lang]}"]
    elif frame["alive"]:
        lines.append(msg("wr_no_readings" if not has_readings(frame) else "wr_no_warnings", lang))
    if frame["history"]:
        first = frame["history"][0]
        lines.append(msg("wr_first", lang, text=first["text"][lang], elapsed=_num(first["time_s"]),
                         step=_num(first["step_seen"])))  # fmt: skip
    return lines


def _end_lines(frame: dict[str, Any], final: Any, lang: Lang) -> list[str]:
    """Once the run has ended, the diagnosis (or why there is none); before, how to stop watching."""
    if not frame["ended"]:
        return ["", msg("watch_hint", lang)]
    if final is None:
        return ["", msg("wr_ended", lang), "", str((frame.get("diagnosis") or {}).get("error", "-"))]
    from oomdoctor.report.diagnosis import report

    return ["", msg("wr_ended", lang), "", report(final, lang)]
