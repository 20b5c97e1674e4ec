"""``oomdoctor watch``: the course's ``watch -n 1 nvidia-smi`` in a second terminal, touching nothing.

Per GPU: name, used/total with a bar, utilisation, power and the processes on it; then the host's RAM (a
bare ``Killed`` is host RAM). Without an NVIDIA GPU it says so and shows the host's RAM. Redraws in place on
a terminal (ANSI clear), appends frames otherwise; ``--once`` prints one frame, ``--json`` one JSON object per
frame. Ctrl+C ends it with exit 0: only this monitor stops, never the training.

With ``--config`` (or ``--pid``) it watches one run (``oomdoctor.watch``): its processes, its log and
``trainer_log.jsonl``, the coming validations and saves, and early warnings before it runs out; when the run
ends, the frame turns into the diagnosis of its log (exit 1 when it ran out of memory).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from oomdoctor.commands._inputs import int_in, number_in
from oomdoctor.errors import EXIT_FAILED, EXIT_OK, BadInput
from oomdoctor.i18n import Lang, help_text, msg
from oomdoctor.report.units import meter as bar

CLEAR = "\x1b[H\x1b[2J"
MIB = 1024 * 1024


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        help=help_text("help_watch_config"),
    )
    parser.add_argument(
        "--log",
        help=help_text("help_watch_log"),
    )
    parser.add_argument(
        "--lengths",
        help=help_text("help_watch_lengths"),
    )
    parser.add_argument(
        "--pid",
        type=int_in(1, 2**22),
        help=help_text("help_watch_pid"),
    )
    parser.add_argument(
        "--interval",
        type=number_in(0.05, 3600.0),
        default=1.0,
        help=help_text("help_watch_interval"),
    )
    parser.add_argument("--once", action="store_true", help=help_text("help_watch_once"))
    parser.add_argument(
        "--json",
        action="store_true",
        help=help_text("help_watch_json"),
    )


def read_frame(source: Any) -> dict[str, Any]:
    """Everything one frame shows, as plain data (the JSON output)."""
    import psutil

    from oomdoctor.facts.gpu import read_gpu

    gpu = read_gpu(source)
    live = {row[0]: row for row in source.sample()} if gpu.available else {}
    gpus = []
    for dev in gpu.devices:
        row = live.get(dev.index)
        gpus.append(
            {
                "index": dev.index,
                "name": dev.name,
                "memory_used_mib": row[1] if row else dev.used_mib,
                "memory_total_mib": row[2] if row else dev.total_mib,
                "util_pct": row[3] if row else None,
                "power_w": row[4] if row else None,
                "processes": [{"pid": p.pid, "name": p.name, "used_mib": p.used_mib} for p in dev.processes],
            }
        )
    vm = psutil.virtual_memory()
    return {
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "gpu_available": gpu.available,
        "reason": gpu.reason,
        "driver": gpu.driver,
        "gpus": gpus,
        "host": {"memory_used_mib": (vm.total - vm.available) / MIB, "memory_total_mib": vm.total / MIB},
    }


def render_frame(
    frame: dict[str, Any], lang: Lang, interval_s: float | None = None, reason: str | None = None
) -> str:
    """The frame as text; ``reason`` is the no-GPU reason in ``lang`` when the source can say it so."""
    from oomdoctor.report import units
    from oomdoctor.report.table import pad

    head = msg("watch_title", lang, time=frame["time"])
    if interval_s is not None:
        head += "  " + msg("watch_every", lang, interval=interval_s)
    lines = [head, ""]
    if not frame["gpu_available"]:
        lines.append(msg("watch_no_gpu", lang, reason=reason or frame["reason"] or "-"))
    for g in frame["gpus"]:
        used, total = g["memory_used_mib"], g["memory_total_mib"]
        util = units.percent(g["util_pct"])
        power = units.watts(g["power_w"])
        lines.append(f"GPU {g['index']}  {g['name']}")
        lines.append(
            f"  {bar(used, total)} {units.mib(used or 0, unit=False)} / {units.mib(total)}  "
            + msg("watch_util_power", lang, util=util, power=power)
        )
        if g["processes"]:
            for p in g["processes"]:
                used_p = units.mib(p["used_mib"])
                lines.append(f"    pid {p['pid']:>7}  {pad(used_p, 12, 'right')}  {p['name'] or '?'}")
        else:
            lines.append("    " + msg("watch_no_processes", lang))
    host = frame["host"]
    lines += [
        "",
        msg("watch_host", lang),
        f"  {bar(host['memory_used_mib'], host['memory_total_mib'])} "
        f"{units.mib(host['memory_used_mib'], unit=False)} / {units.mib(host['memory_total_mib'])}",
        "",
        msg("watch_hint", lang),
    ]
    return "\n".join(lines)


def _wait_for_frame(stop: threading.Event, due: float, interval_s: float, clock: Callable[[], float]) -> bool:
    """Wait until the next frame is due (drift-corrected: a slow frame skips, never bunches); True when stopped."""
    now = clock()
    while due < now:
        due += interval_s
    return stop.wait(due - now)


def _frame_loop(
    next_frame: Callable[[], dict[str, Any]],
    show: Callable[[dict[str, Any]], str],
    done: Callable[[dict[str, Any], int], int | None],
    out: TextIO,
    interval_s: float,
    stop: threading.Event | None,
    clock: Callable[[], float],
) -> int:
    """Write frames on a drift-corrected interval until ``done`` gives an exit code, ``stop`` is set or Ctrl+C."""
    stop = stop if stop is not None else threading.Event()
    start, shown = clock(), 0
    try:
        while True:
            frame = next_frame()
            out.write(show(frame))
            out.flush()
            shown += 1
            code = done(frame, shown)
            if code is not None:
                return code
            if _wait_for_frame(stop, start + shown * interval_s, interval_s, clock):
                return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_OK


def watch(
    source: Any,
    *,
    lang: Lang,
    interval_s: float = 1.0,
    once: bool = False,
    as_json: bool = False,
    out: TextIO | None = None,
    stop: threading.Event | None = None,
    frames: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Print frames until Ctrl+C, ``stop`` or ``frames`` frames. Only reads; exit 0."""
    out = out if out is not None else sys.stdout
    redraw = not as_json and not once and out.isatty()

    def show(frame: dict[str, Any]) -> str:
        if as_json:
            return json.dumps(frame, ensure_ascii=False) + "\n"
        reason_in = getattr(source, "reason_in", None)
        reason = reason_in(lang) if callable(reason_in) and not frame["gpu_available"] else None
        text = render_frame(frame, lang, None if once else interval_s, reason)
        return (CLEAR + text + "\n") if redraw else (text + "\n\n")

    def done(frame: dict[str, Any], shown: int) -> int | None:
        return EXIT_OK if once or (frames is not None and shown >= frames) else None

    return _frame_loop(lambda: read_frame(source), show, done, out, interval_s, stop, clock)


def run(args: argparse.Namespace) -> int:
    from oomdoctor.facts.gpu import NvmlSource

    if not args.interval or args.interval <= 0:
        raise BadInput(msg("watch_bad_interval", None, value=args.interval))
    if args.config or args.pid is not None:
        return _watch_run(args, NvmlSource())
    return watch(NvmlSource(), lang=args.lang, interval_s=args.interval, once=args.once, as_json=args.json)


def _watch_run(args: argparse.Namespace, source: Any) -> int:
    from oomdoctor.watch import Watcher
    from oomdoctor.watch.render import render_run_frame

    if not args.config:
        raise BadInput(msg("watch_needs_config", None))
    watcher = Watcher(
        args.config, log_path=args.log, lengths_file=args.lengths, pid=args.pid, gpu_source=source
    )
    return watch_run(
        watcher,
        lambda frame: render_run_frame(frame, watcher.final, args.lang),
        interval_s=args.interval,
        once=args.once,
        as_json=args.json,
    )


def watch_run(
    watcher: Any,
    render: Callable[[dict[str, Any]], str],
    *,
    interval_s: float = 1.0,
    once: bool = False,
    as_json: bool = False,
    out: TextIO | None = None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Frames of one run until it ends (then its diagnosis: exit 1 when it ran out), Ctrl+C or ``stop``."""
    out = out if out is not None else sys.stdout
    redraw = not as_json and not once and out.isatty()

    def show(frame: dict[str, Any]) -> str:
        text = json.dumps(frame, ensure_ascii=False) if as_json else render(frame)
        return text + "\n" if as_json or not redraw else CLEAR + text + "\n"

    def done(frame: dict[str, Any], shown: int) -> int | None:
        if frame["ended"]:
            diagnosis = frame.get("diagnosis") or {}
            return EXIT_FAILED if diagnosis.get("oom") else EXIT_OK
        return EXIT_OK if once else None

    return _frame_loop(watcher.poll, show, done, out, interval_s, stop, clock)
