"""When the coming validations and saves happen, from the config's schedule (transformers semantics).

``eval_steps``/``save_steps`` below 1 are a ratio of the total steps (rounded up); the Trainer evaluates and
saves when ``global_step % interval == 0``. ``eval_strategy``/``save_strategy`` ``epoch`` happen at the end of
each epoch. Saves default to every 500 steps (the Trainer's default ``save_steps``).
"""

from __future__ import annotations

import math

from oomdoctor.facts.types import ConfigFacts

DEFAULT_SAVE_STEPS = 500


def _interval(value: float | int | None, total_steps: int | None) -> int | None:
    if value is None or value <= 0:
        return None
    if value < 1:
        return math.ceil(value * total_steps) if total_steps else None
    return int(value)


def _epoch_interval(config: ConfigFacts, total_steps: int | None) -> int | None:
    epochs = config.num_train_epochs
    if not total_steps or not epochs or config.max_steps:
        return total_steps  # max_steps runs: the Trainer's "epoch" is the whole dataloader, once here
    return max(1, math.ceil(total_steps / math.ceil(epochs)))


def eval_interval(config: ConfigFacts, total_steps: int | None) -> int | None:
    if not config.do_eval:
        return None
    if config.eval_strategy == "steps":
        return _interval(config.eval_steps, total_steps)
    if config.eval_strategy == "epoch":
        return _epoch_interval(config, total_steps)
    return None


def save_interval(config: ConfigFacts, total_steps: int | None) -> int | None:
    strategy = str(config.raw.get("save_strategy", "steps")).lower()
    if strategy == "no":
        return None
    if strategy == "epoch":
        return _epoch_interval(config, total_steps)
    return _interval(config.save_steps or DEFAULT_SAVE_STEPS, total_steps)


def next_at(
    interval: int | None, step: int | None, total_steps: int | None, *, include_last: bool
) -> int | None:
    """The first multiple of ``interval`` after ``step`` (steps done so far), within the run."""
    if interval is None:
        return None
    done = step or 0
    nxt = (done // interval + 1) * interval
    if total_steps is not None and nxt > total_steps:
        return total_steps if include_last and done < total_steps else None
    return nxt


def next_eval(config: ConfigFacts, step: int | None, total_steps: int | None) -> int | None:
    """The next validation; a run with ``do_eval`` and no step schedule evaluates once at the end."""
    interval = eval_interval(config, total_steps)
    if interval is None and config.do_eval and config.eval_strategy == "no" and total_steps:
        return total_steps if (step or 0) < total_steps else None
    return next_at(interval, step, total_steps, include_last=False)


def next_save(config: ConfigFacts, step: int | None, total_steps: int | None) -> int | None:
    """The next checkpoint save; the Trainer also saves at the last step when save_steps is set."""
    return next_at(save_interval(config, total_steps), step, total_steps, include_last=False)
