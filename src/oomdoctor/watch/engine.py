"""The warning engine: from one observation of a live run to the early warnings it deserves. Pure: no I/O.

An observation is where the run is (step, total, in validation, allocator retries) and the memories it can
run out of (``Pool``: a GPU, or host memory under its binding limit). The plan is what the estimate says the
coming phases need on top of what the run always holds. Each warning kind is one small check (``CHECKS``)
with its thresholds in ``rules/live/warnings.yaml``; the change that prevents it comes from the decision nodes
through ``advise`` (the caller's, so tests can see what was asked).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oomdoctor.facts.types import ConfigFacts
from oomdoctor.report import units
from oomdoctor.text import Text
from oomdoctor.watch import schedule


@dataclass(frozen=True)
class Pool:
    """One memory the run can run out of."""

    name: str  # "gpu0" / "host"
    kind: str  # "gpu" / "host"
    source: str  # "card" / "rlimit_as" / "cgroup" / "host"
    limit_mib: float
    used_mib: float  # everything that counts against the limit now
    run_mib: float | None = None  # what the training itself holds (GPU: its processes' NVML memory)
    index: int | None = None  # the CUDA index of a GPU
    others: tuple[tuple[int, str | None, float | None], ...] = ()  # (pid, name, MiB) not of the run

    @property
    def left_mib(self) -> float:
        return self.limit_mib - self.used_mib


@dataclass(frozen=True)
class Observation:
    time_s: float
    pools: tuple[Pool, ...]
    step: int | None = None
    total_steps: int | None = None
    eta_s: float | None = None
    in_eval: bool = False
    training_started: bool = False
    retries: int = 0
    vram_reserved_mib: float | None = None  # RECORD_VRAM's PyTorch reserved peak


@dataclass(frozen=True)
class Plan:
    """What the estimate says about the phases to come (MiB on top of what the run always holds)."""

    config: ConfigFacts
    eval_extra_mib: float | None  # the validation forward of one eval batch
    train_extra_mib: float | None  # the worst training micro-batch
    static_mib: float  # weights, trainable state, overhead: held all along
    context_mib: float  # CUDA context (GPU only)
    eval_batch: int
    eval_len: int | None
    micro_batch: int
    padded_len: int
    padded_len_source: str = "cutoff_len"  # "longest_sample" when real lengths are known
    state_mib: float = 0.0  # gradients and optimizer state: allocated by the first backward and update
    accumulation: int = 1
    # what a checkpoint save adds, by part (the estimate's save_gpu_mib / save_host_mib; empty without a GPU:
    # the tensors are in host memory already and nothing is copied)
    save_gpu_parts: dict[str, float] = field(default_factory=dict)
    save_host_parts: dict[str, float] = field(default_factory=dict)


@dataclass
class LiveWarning:
    kind: str
    expected_step: int | None
    needed_mib: float | None
    left_mib: float | None
    rule: str | None
    changes: dict[str, list[Any]]
    env: dict[str, str]
    text: Text
    act: Text
    pool: str
    time_s: float
    step_seen: int | None  # the step the run was at when it was raised

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "expected_step": self.expected_step,
            "needed_mib": None if self.needed_mib is None else round(self.needed_mib, 1),
            "left_mib": None if self.left_mib is None else round(self.left_mib, 1),
            "rule": self.rule,
            "changes": self.changes,
            "env": self.env,
            "text": self.text,
            "act": self.act,
            "pool": self.pool,
            "time_s": round(self.time_s, 2),
            "step_seen": self.step_seen,
        }


@dataclass
class Advice:
    rule: str | None
    changes: dict[str, list[Any]]
    env: dict[str, str]
    change_text: Text


# (kind, fields of the warning) -> the decision nodes' change for the failure it foresees
Advise = Callable[[str, dict[str, Any]], Advice]


def _size(mib: float | None) -> str:
    """A size in a warning's words: MiB below a GiB, GiB with one digit above; "?" when unknown."""
    return units.size(mib, gib_digits=1, missing="?")


@dataclass
class _State:
    floors: dict[str, deque[float]] = field(default_factory=dict)  # recent room left, host pools
    trend: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)  # (time, used), host pools
    first_others: dict[str, set[int]] = field(default_factory=dict)  # pids on each card at the start
    retries_start: int | None = None


class WarningEngine:
    """Feed observations in order; each gives the warnings active now. ``history`` keeps every kind's first."""

    def __init__(self, plan: Plan, spec: dict[str, Any], advise: Advise) -> None:
        self.plan = plan
        self.spec = spec
        self.advise = advise
        self.history: list[LiveWarning] = []
        self._advice: dict[str, Advice] = {}
        self._state = _State()

    # ---- room left -------------------------------------------------------------------------------------
    def _remember(self, obs: Observation) -> None:
        frames = int(self.spec.get("host_floor_frames", 5))
        for pool in obs.pools:
            if pool.kind == "host":
                self._state.floors.setdefault(pool.name, deque(maxlen=frames)).append(pool.left_mib)
                if obs.step:  # from the first finished step: loading and the first batch ramp up once
                    points = int(self.spec["kinds"]["host_ram_trend"]["min_points"]) * 2
                    self._state.trend.setdefault(pool.name, deque(maxlen=points)).append(
                        (obs.time_s, pool.used_mib)
                    )
            else:
                self._state.first_others.setdefault(pool.name, {pid for pid, _, _ in pool.others})
        if self._state.retries_start is None:
            self._state.retries_start = obs.retries

    def left_mib(self, pool: Pool) -> float:
        """Room left: a GPU's now; a host limit's best of the last frames (big blocks come and go per step)."""
        if pool.kind == "host" and self._state.floors.get(pool.name):
            return max(self._state.floors[pool.name])
        return pool.left_mib

    def reusable_mib(self, pool: Pool) -> float:
        """What the allocator already caches beyond the run's lasting state (a GPU's reserve is reused)."""
        if pool.kind != "gpu" or pool.run_mib is None:
            return 0.0
        return max(0.0, pool.run_mib - self.plan.static_mib - self.plan.context_mib)

    def target(self, obs: Observation) -> Pool | None:
        """The memory the run's tensors live in: its GPU with the least room (any GPU before it holds one), else
        the tightest host limit (no GPU: the tensors live in host memory)."""
        gpus = [p for p in obs.pools if p.kind == "gpu"]
        pools = (
            [p for p in gpus if (p.run_mib or 0) > 0] or gpus or [p for p in obs.pools if p.kind == "host"]
        )
        return min(pools, key=self.left_mib, default=None)

    # ---- the round -------------------------------------------------------------------------------------
    def observe(self, obs: Observation) -> list[LiveWarning]:
        self._remember(obs)
        active: list[LiveWarning] = []
        for kind, check in CHECKS.items():
            for fields in check(self, obs):
                active.append(self._warning(kind, fields, obs))
        seen = {w.kind for w in self.history}
        self.history.extend(w for w in active if w.kind not in seen)
        return active

    def _warning(self, kind: str, fields: dict[str, Any], obs: Observation) -> LiveWarning:
        key = f"{kind}/{fields['pool'].kind}"  # a save can foresee a GPU and a host failure: each its advice
        if key not in self._advice:
            self._advice[key] = self.advise(kind, fields)
        advice = self._advice[key]
        spec = self.spec["kinds"][kind]
        words = _words(fields, advice, self.spec)
        act = (
            spec["act_manual"] if "act_manual" in spec and not (advice.changes or advice.env) else spec["act"]
        )
        return LiveWarning(
            kind=kind,
            expected_step=fields.get("expected_step"),
            needed_mib=fields.get("needed_mib"),
            left_mib=fields.get("left_mib"),
            rule=advice.rule,
            changes=advice.changes,
            env=advice.env,
            text=Text.each(lambda lang: spec["text"][lang].format(**words[lang])),
            act=Text.each(lambda lang: act[lang].format(**words[lang])),
            pool=fields["pool"].name,
            time_s=obs.time_s,
            step_seen=obs.step,
        )


def _words(fields: dict[str, Any], advice: Advice, spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    pool: Pool = fields["pool"]
    out = {}
    for lang in ("en", "zh"):
        out[lang] = {
            "step": fields.get("expected_step", "?"),
            "needed": _size(fields.get("needed_mib")),
            "left": _size(fields.get("left_mib")),
            "limit": _size(fields.get("limit_mib")),
            "used": _size(fields.get("used_mib")),
            "other": _size(fields.get("other_mib")),
            "rate": _size(fields.get("rate_mib_s")),
            "pool": spec["pools"][pool.source][lang].format(index=pool.index),
            "length_source": spec["length_sources"][fields.get("length_source", "cutoff_len")][lang],
            "part": spec["save_parts"].get(fields.get("part"), {}).get(lang, "-"),
            "change": advice.change_text.get(lang, "-"),
            "rule": advice.rule or "-",
            **{k: fields.get(k, "?") for k in ("eval_batch", "eval_len", "micro_batch", "padded_len",
                                                "retries", "pid", "name", "seconds", "accumulation")},
        }  # fmt: skip
    return out


def _base(engine: WarningEngine, pool: Pool) -> dict[str, Any]:
    return {
        "pool": pool,
        "limit_mib": pool.limit_mib,
        "used_mib": pool.used_mib,
        "left_mib": engine.left_mib(pool),
    }


def _total(engine: WarningEngine, obs: Observation) -> int | None:
    return obs.total_steps or engine.plan.config.max_steps


# ---- the checks, one per kind ------------------------------------------------------------------------------


def check_eval(engine: WarningEngine, obs: Observation) -> list[dict[str, Any]]:
    plan = engine.plan
    pool = engine.target(obs)
    if pool is None or plan.eval_extra_mib is None or obs.in_eval:
        return []
    step = schedule.next_eval(plan.config, obs.step, _total(engine, obs))
    if step is None:
        return []
    fields = _base(engine, pool)
    needed = plan.eval_extra_mib - engine.reusable_mib(pool)
    if needed <= fields["left_mib"] * float(engine.spec["kinds"]["eval_needs_more"]["needed_over_left"]):
        return []
    return [{**fields, "needed_mib": needed, "expected_step": step, "eval_batch": plan.eval_batch,
             "eval_len": plan.eval_len}]  # fmt: skip


def check_longest_batch(engine: WarningEngine, obs: Observation) -> list[dict[str, Any]]:
    plan = engine.plan
    pool = engine.target(obs)
    total = _total(engine, obs)
    if pool is None or plan.train_extra_mib is None or (total is not None and (obs.step or 0) >= total):
        return []
    fields = _base(engine, pool)
    needed = plan.train_extra_mib - engine.reusable_mib(pool)
    if needed <= fields["left_mib"] * float(
        engine.spec["kinds"]["longest_batch_needs_more"]["needed_over_left"]
    ):
        return []
    return [{**fields, "needed_mib": needed, "expected_step": None, "micro_batch": plan.micro_batch,
             "padded_len": plan.padded_len, "length_source": plan.padded_len_source}]  # fmt: skip


def check_first_update(engine: WarningEngine, obs: Observation) -> list[dict[str, Any]]:
    plan = engine.plan
    pool = engine.target(obs)
    if pool is None or obs.step or plan.state_mib <= 0:
        return []
    fields = _base(engine, pool)
    needed = plan.state_mib - engine.reusable_mib(pool)
    if needed <= fields["left_mib"] * float(
        engine.spec["kinds"]["first_update_needs_more"]["needed_over_left"]
    ):
        return []
    return [{**fields, "needed_mib": needed, "expected_step": 1, "accumulation": plan.accumulation}]


def check_save(engine: WarningEngine, obs: Observation) -> list[dict[str, Any]]:
    """The next checkpoint save: its GPU part against the run's GPU, its host part against host memory."""
    plan = engine.plan
    step = schedule.next_save(plan.config, obs.step, _total(engine, obs))
    if step is None:
        return []
    ratio = float(engine.spec["kinds"]["save_needs_more"]["needed_over_left"])
    gpu = engine.target(obs)
    host = min((p for p in obs.pools if p.kind == "host"), key=engine.left_mib, default=None)
    found = []
    for pool, parts in ((gpu, plan.save_gpu_parts), (host, plan.save_host_parts)):
        if pool is None or not parts or (pool is gpu and pool.kind != "gpu"):
            continue
        fields = _base(engine, pool)
        needed = sum(parts.values()) - engine.reusable_mib(pool)
        if needed > fields["left_mib"] * ratio:
            found.append({**fields, "needed_mib": needed, "expected_step": step, "part": max(parts, key=parts.__getitem__),
                          "ran_out_of": pool.kind, "oom_kind": "cuda_oom" if pool.kind == "gpu" else "killed"})  # fmt: skip
    return found


def check_near_limit(engine: WarningEngine, obs: Observation) -> list[dict[str, Any]]:
    margin = float(engine.spec["kinds"]["near_limit"]["margin_fraction"])
    found = []
    for pool in obs.pools:
        if pool.kind == "host" and pool is not engine.target(obs):
            continue  # only the host limit the run meets first
        used = pool.used_mib
        if pool.kind == "gpu" and obs.vram_reserved_mib is not None and (pool.run_mib or 0) > 0:
            used = max(used, obs.vram_reserved_mib + engine.plan.context_mib)
        left = pool.limit_mib - used if pool.kind == "gpu" else engine.left_mib(pool)
        if pool.limit_mib > 0 and left <= margin * pool.limit_mib:
            found.append({**_base(engine, pool), "used_mib": pool.limit_mib - left, "left_mib": left})
    return found


def check_retries(engine: WarningEngine, obs: Observation) -> list[dict[str, Any]]:
    start = engine._state.retries_start or 0
    pool = engine.target(obs)
    if pool is None or obs.retries <= start:
        return []
    return [{**_base(engine, pool), "retries": obs.retries}]


def check_host_trend(engine: WarningEngine, obs: Observation) -> list[dict[str, Any]]:
    spec = engine.spec["kinds"]["host_ram_trend"]
    pool = next((p for p in obs.pools if p.kind == "host" and p is engine.target(obs)), None)
    if pool is None:
        pool = min((p for p in obs.pools if p.kind == "host"), key=engine.left_mib, default=None)
    points = engine._state.trend.get(pool.name) if pool is not None else None
    if pool is None or not points or len(points) < int(spec["min_points"]):
        return []
    rate = _slope(list(points))
    left = engine.left_mib(pool)
    if rate <= 0 or pool.used_mib < float(spec["min_used_fraction"]) * pool.limit_mib:
        return []
    seconds = left / rate
    span_s = points[-1][0] - points[0][0]
    if seconds > float(spec["horizon_s"]) or rate * span_s < float(spec["min_rise_fraction_of_left"]) * left:
        return []  # too slow, or a wobble rather than a climb
    step = None
    total = _total(engine, obs)
    if obs.eta_s and obs.step and total and total > obs.step:
        step = min(total, obs.step + int(seconds / (obs.eta_s / (total - obs.step))))
    return [{**_base(engine, pool), "rate_mib_s": rate, "seconds": round(seconds), "expected_step": step}]


def check_other_process(engine: WarningEngine, obs: Observation) -> list[dict[str, Any]]:
    found = []
    for pool in obs.pools:
        if pool.kind != "gpu":
            continue
        first = engine._state.first_others.get(pool.name, set())
        for pid, name, mib in pool.others:
            if pid not in first:
                found.append({**_base(engine, pool), "pid": pid, "name": name or "?", "other_mib": mib,
                              "other_pid": pid})  # fmt: skip
    return found[:1]


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope (MiB per second)."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var <= 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var


CHECKS: dict[str, Callable[[WarningEngine, Observation], list[dict[str, Any]]]] = {
    "eval_needs_more": check_eval,
    "longest_batch_needs_more": check_longest_batch,
    "first_update_needs_more": check_first_update,
    "save_needs_more": check_save,
    "near_limit": check_near_limit,
    "alloc_retries": check_retries,
    "host_ram_trend": check_host_trend,
    "other_process": check_other_process,
}
