"""Where a log that shows a run under way stops when it holds no error line at all.

A CUDA out-of-memory always raises a Python exception, so it prints a traceback and an error line. A run
whose log simply stops (inside a progress bar, after "Loading checkpoint shards", after the last training
step) was killed from outside the process: most often the host's OOM killer (system RAM), sometimes a job
scheduler, or the excerpt was cut by whoever pasted it. Such a log is not "no OOM": the tool says where it
stops and asks, and names the save or evaluation the config schedules right after the last step seen as the
likely place (asked, never asserted).

A log that ends with its own reason is left alone: another error (NCCL timeout, illegal memory access), a
loss that is no longer a number anywhere in it (a NaN run keeps logging, and its last loss may be normal again),
or the Trainer's end-of-training summary (``train_runtime``), after which the run finished by itself, unless the
log's last line is a warning from the final save's own code (an FSDP state-dict warning after the summary): then
it stopped in that save.
A last loss of exactly 0 counts as a NaN run.
"""

from __future__ import annotations

import math

from oomdoctor.facts.types import ConfigFacts, LogFacts
from oomdoctor.records import record

# A scheduled save/evaluation counts as "right after the last step seen" within this many steps of it, or this
# share of its interval when that is more (a pasted bar is often a few refreshes behind the kill).
NEAR_STEPS = 2
NEAR_SHARE = 0.01
# LLaMA-Factory's own record of the steps (one JSON line per logged step, never an error): read alone, its last
# record at the total number of steps is the end of training, with nothing after it ever written there.
TRAINER_LOG_NAME = "trainer_log.jsonl"


@record(frozen=True)
class LogStop:
    """Where the log stops: ``where`` load (weights loading or loaded, or DeepSpeed initialising, no training
    step yet) / train (inside
    the training steps) / train_end (every step done, no end-of-training summary yet) / save (its last lines
    are a save's, e.g. the final save after the summary); the last completed
    step and the total; the save or evaluation the config runs next, when it is right after that step."""

    where: str
    step: int | None = None
    total: int | None = None
    next_kind: str | None = None  # "save" / "eval"
    next_step: int | None = None


def log_stop(config: ConfigFacts | None, log: LogFacts | None) -> LogStop | None:
    """The log's stop when it shows a run under way and no error line of any kind; None otherwise."""
    if log is None or log.oom or log.traceback_cut or log.other_error:
        return None
    if log.nonfinite_seen or _broken_loss(log.last_loss) or _not_finite(log.eval_loss):
        return None
    if log.train_runtime_s is not None:
        if log.stopped_in == "save" and log.stopped_on_warning:
            return LogStop("save", log.good_steps, log.total_steps)  # the final save warned, then nothing
        return None
    where = _where(log)
    if where is None:
        return None
    step, total = log.good_steps, log.total_steps
    if where == "train_end":
        if str(log.path or "").endswith(TRAINER_LOG_NAME):
            return None  # the step record reached its total: the training finished
        return LogStop(where, step, total, "save", step)  # the model is saved once training ends
    kind, at = _scheduled_next(config, log) if where == "train" else (None, None)
    return LogStop(where, step, total, kind, at)


def _not_finite(value: float | None) -> bool:
    return value is not None and not math.isfinite(value)


def _broken_loss(value: float | None) -> bool:
    """A training loss that is no number, or exactly 0: NaN gradients (a loss of 0.0 beside ``grad_norm: nan``)
    or every label masked. The run keeps logging such steps: it is numerically broken, not killed."""
    return value is not None and (_not_finite(value) or value == 0.0)


def _where(log: LogFacts) -> str | None:
    steps = log.good_steps or 0
    if log.training_started or steps:
        if log.total_steps and steps >= log.total_steps:
            return "train_end"
        return "train"
    if log.loading_shards or log.weights_loaded or log.stopped_in in ("load", "zero_init") or log.launched:
        return "load"  # started by its launcher, reading the data or the model, DeepSpeed building its partitions
    return None


def _scheduled_next(config: ConfigFacts | None, log: LogFacts) -> tuple[str | None, int | None]:
    """The save or evaluation the config's schedule runs right after the last completed step, if one does."""
    if config is None or not log.good_steps:
        return None, None
    step = log.good_steps
    for kind, every in (("save", _save_every(config, log)), ("eval", _eval_every(config, log))):
        if not every:
            continue
        at = math.ceil(step / every) * every
        if at - step <= max(NEAR_STEPS, every * NEAR_SHARE):
            return kind, at
    return None, None


def _save_every(config: ConfigFacts, log: LogFacts) -> int | None:
    from oomdoctor.facts.config import setting

    if str(setting(config, "save_strategy") or "steps").lower() != "steps":
        return None
    return _interval(config.save_steps or setting(config, "save_steps"), log.total_steps)


def _eval_every(config: ConfigFacts, log: LogFacts) -> int | None:
    if not config.do_eval or config.eval_strategy != "steps":
        return None
    return _interval(config.eval_steps, log.total_steps)


def _interval(every: object, total: int | None) -> int | None:
    """Steps between two saves/evaluations: a whole number, or a ratio below 1 of the total (transformers)."""
    if isinstance(every, bool) or not isinstance(every, int | float) or every <= 0:
        return None
    if every < 1:
        return math.ceil(every * total) if total else None
    return int(every)
