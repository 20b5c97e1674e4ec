"""One watch of one run: find it, follow it, warn, and when it dies, diagnose its log. Reads only.

``Watcher.poll()`` returns one frame as plain data (what ``watch --json`` prints and the TUI draws).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oomdoctor.facts.gpu import GpuSource
from oomdoctor.watch import logstate, procs, schedule
from oomdoctor.watch.engine import Observation, Pool, WarningEngine
from oomdoctor.watch.follow import LogFollower, Progress, TrainerLogFollower


def _output_dir(config_path: Path, output_dir: str | None) -> Path | None:
    if not output_dir:
        return None
    path = Path(output_dir).expanduser()
    return path if path.is_absolute() else Path.cwd() / path


def run_is_live(config_path: str | os.PathLike[str], log_path: str | os.PathLike[str] | None = None) -> bool:
    """True when a running process names the config or its output_dir, or when the run's log is still being
    written (``logstate.log_is_live``: a run launched where we cannot see its process). The TUI then opens
    watch mode."""
    from oomdoctor.errors import BadInput
    from oomdoctor.facts.config import read_config

    try:
        output_dir = _output_dir(Path(config_path), read_config(Path(config_path)).output_dir)
    except BadInput:
        return False
    if procs.find_training(str(config_path), str(output_dir) if output_dir else None):
        return True
    return logstate.log_is_live(Path(log_path) if log_path is not None else None, output_dir)


class Watcher:
    def __init__(
        self,
        config_path: str | os.PathLike[str],
        *,
        log_path: str | os.PathLike[str] | None = None,
        lengths_file: str | os.PathLike[str] | None = None,
        pid: int | None = None,
        gpu_source: GpuSource,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from oomdoctor.api import gather
        from oomdoctor.watch.advice import load_spec, make_advise, make_plan

        self.config_path = Path(config_path)
        self.log_path = Path(log_path) if log_path is not None else None
        self.source = gpu_source
        self.on_gpu = gpu_source.available()
        self.facts = gather(self.config_path, None, gpu_source=gpu_source, lengths_file=lengths_file)
        assert self.facts.config is not None
        self.config = self.facts.config
        self.output_dir = _output_dir(self.config_path, self.config.output_dir)
        plan = make_plan(self.facts, on_gpu=self.on_gpu)
        assert plan is not None
        self.plan = plan
        self.engine = WarningEngine(plan, load_spec(), make_advise(self.facts))
        self.pid = pid
        self.tree: procs.ProcessTree | None = None
        self.found_once = False
        self.ended = False
        self.diagnosis: dict[str, Any] | None = None  # the JSON of the final diagnosis
        self.final: Any = None  # the Diagnosis itself (text reports)
        self.progress = Progress()
        self._followers: list[Any] = []
        self._followed: set[Path] = set()
        self._clock = clock
        self._start = clock()
        self.peaks: dict[str, float] = {}
        self.log_only = False  # no process of the run is visible: followed from its log alone
        self.log = logstate.LogState(None, None, False)
        self._tails = logstate.TailReader()

    # ---- what to follow --------------------------------------------------------------------------------
    def _attach_followers(self) -> None:
        paths: list[tuple[Path, type]] = [
            (p, LogFollower) for p in logstate.console_logs(self.log_path, self.output_dir)
        ]
        jsonl = logstate.trainer_log(self.log_path, self.output_dir)
        if jsonl is not None:
            paths.append((jsonl, TrainerLogFollower))
        for path, kind in paths:
            if path not in self._followed:
                self._followed.add(path)
                self._followers.append(kind(path, self.progress))

    # ---- the processes ---------------------------------------------------------------------------------
    def _members(self) -> list[Any]:
        if self.tree is None or not self.tree.roots:
            roots = (
                [self.pid]
                if self.pid is not None
                else procs.find_training(
                    str(self.config_path), str(self.output_dir) if self.output_dir else None
                )
            )
            if roots:
                self.tree = procs.ProcessTree(roots)
                self._output_dir_from(roots[0])
        members = self.tree.members() if self.tree is not None else []
        if members:
            self.found_once = True
        return members

    def _output_dir_from(self, pid: int) -> None:
        """A relative output_dir is relative to the training's folder, which may not be ours."""
        import psutil

        raw = self.config.output_dir
        if not raw or Path(raw).expanduser().is_absolute():
            return
        with contextlib.suppress(psutil.Error):
            self.output_dir = Path(psutil.Process(pid).cwd()) / raw

    def _gpu_pools(self, run_pids: set[int]) -> list[Pool]:
        if not self.on_gpu:
            return []
        rows = {row[0]: row for row in self.source.sample()}
        pools = []
        for dev in self.source.devices():
            row = rows.get(dev.index)
            used = row[1] if row else (dev.used_mib or 0.0)
            total = row[2] if row else dev.total_mib
            run = sum(p.used_mib or 0.0 for p in dev.processes if p.pid in run_pids)
            others = tuple((p.pid, p.name, p.used_mib) for p in dev.processes if p.pid not in run_pids)
            pools.append(Pool(f"gpu{dev.index}", "gpu", "card", total, used, run, dev.index, others))
        return pools

    def _host_pool(self, members: list[Any]) -> Pool:
        limits = procs.host_limits(members)
        binding = min(limits, key=lambda lim: lim.left_mib)
        return Pool("host", "host", binding.source, binding.limit_mib, binding.used_mib,
                    procs.tree_rss_mib(members) if members else None)  # fmt: skip

    # ---- without a process: the log alone ----------------------------------------------------------------
    def _follow_log_alone(self, members: list[Any]) -> bool:
        """Whether the run is followed from its log alone now: no process of it is visible, and its log was
        written lately (within ``recent_s`` to start, ``stale_s`` to go on) with no end of training."""
        if members or self.found_once or self.ended:
            self.log_only = self.log_only and not members  # a process of the run showed up: watch it
            return False
        window = logstate.stale_s() if self.log_only else logstate.recent_s()
        console = logstate.console_logs(self.log_path, self.output_dir)
        self.log = logstate.log_state(console, logstate.trainer_log(self.log_path, self.output_dir), within_s=window,
                                      reader=self._tails)  # fmt: skip
        live = self.log.written_within(window) and not self.log.ended
        if self.log_only and not live:
            self.ended = True
            self.diagnosis = self._diagnose()
        self.log_only = self.log_only or live
        return live

    def _log_pools(self) -> list[Pool]:
        """The card as the log tells it: RECORD_VRAM's reserved memory (+ a CUDA context) against the card
        the config runs on; none when either is unknown."""
        from oomdoctor.estimate.memory import constants

        reserved, card = self.progress.vram_reserved_mib, self.facts.capacity_mib
        if reserved is None or not card:
            return []
        used = reserved + float(constants()["cuda_context_mib"][0])
        return [Pool("log", "gpu", "log", float(card), used, used)]

    # ---- one frame -------------------------------------------------------------------------------------
    def poll(self) -> dict[str, Any]:
        members = self._members()
        self._attach_followers()
        for follower in self._followers:
            follower.poll()
        alone = self._follow_log_alone(members)
        run_pids = {p.pid for p in members}
        pools = self._log_pools() if alone else self._gpu_pools(run_pids) + [self._host_pool(members)]
        for pool in pools:
            self.peaks[pool.name] = max(self.peaks.get(pool.name, 0.0), pool.used_mib)
        p = self.progress
        now = self._clock() - self._start
        obs = Observation(now, tuple(pools), p.step, p.total_steps, p.eta_s, p.in_eval, p.training_started,
                          p.retries, p.vram_reserved_mib)  # fmt: skip
        warnings = self.engine.observe(obs) if members or (alone and pools) else []
        if self.found_once and not members and not self.ended:
            self.ended = True
            self.diagnosis = self._diagnose()
        return self._frame(obs, members, warnings, alone)

    def _diagnose(self) -> dict[str, Any]:
        from oomdoctor.api import run_diagnosis
        from oomdoctor.errors import BadInput

        log = self.log_path or self.output_dir
        try:
            final = run_diagnosis(self.config_path, log, gpu_source=self.source)
        except BadInput as err:
            return {"error": str(err)}
        self.final = final
        return final.to_json()

    def _frame(
        self, obs: Observation, members: list[Any], warnings: list[Any], alone: bool
    ) -> dict[str, Any]:
        total = obs.total_steps or self.config.max_steps
        target = self.engine.target(obs)
        pools = [self._pool_json(pool, pool is target, obs) for pool in obs.pools]
        if alone and not pools:
            pools = [self._estimate_json(obs)]
        return {
            "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "unix_time": round(time.time(), 3),
            "elapsed_s": round(obs.time_s, 2),
            "config": str(self.config_path),
            "pids": sorted(p.pid for p in members),
            "alive": bool(members) or alone,
            "log_only": self.log_only,
            "log_file": str(self.log.path) if self.log_only and self.log.path else None,
            "log_age_s": None if not self.log_only or self.log.age_s is None else round(self.log.age_s, 1),
            "ended": self.ended,
            "step": obs.step,
            "total_steps": total,
            "loss": self.progress.loss,
            "eta_s": obs.eta_s,
            "in_eval": obs.in_eval,
            "next_eval_step": schedule.next_eval(self.config, obs.step, total),
            "next_save_step": schedule.next_save(self.config, obs.step, total),
            "pools": pools,
            "warnings": [w.to_json() for w in warnings],
            "history": [w.to_json() for w in self.engine.history],
            "diagnosis": self.diagnosis,
        }

    def _pool_json(self, pool: Pool, target: bool, obs: Observation) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": pool.name,
            "kind": pool.kind,
            "limit_source": pool.source,
            "limit_mib": round(pool.limit_mib, 1),
            "used_mib": round(pool.used_mib, 1),
            "left_mib": round(self.engine.left_mib(pool), 1),
            "run_mib": None if pool.run_mib is None else round(pool.run_mib, 1),
            "peak_mib": round(self.peaks.get(pool.name, pool.used_mib), 1),
            "others": [{"pid": pid, "name": name, "used_mib": mib} for pid, name, mib in pool.others],
        }
        save_coming = (
            schedule.next_save(self.config, obs.step, obs.total_steps or self.config.max_steps) is not None
        )
        if target:
            out["phase_lines_mib"] = self._phase_lines(pool, save_coming)
        elif pool.kind == "host" and save_coming and self.plan.save_host_parts:
            out["phase_lines_mib"] = {
                "save": round(self._held(pool) + sum(self.plan.save_host_parts.values()), 1)
            }
        return out

    def _estimate_json(self, obs: Observation) -> dict[str, Any]:
        """No memory to read (log alone, no RECORD_VRAM): the estimate's own levels against the card."""
        from oomdoctor.estimate.memory import constants

        held = self.plan.static_mib + float(constants()["cuda_context_mib"][0])
        save_coming = (
            schedule.next_save(self.config, obs.step, obs.total_steps or self.config.max_steps) is not None
        )
        lines = {}
        if self.plan.eval_extra_mib is not None:
            lines["eval"] = round(held + self.plan.eval_extra_mib, 1)
        if self.plan.train_extra_mib is not None:
            lines["longest_batch"] = round(held + self.plan.train_extra_mib, 1)
        if save_coming and self.facts.estimate is not None:  # the run is on a GPU, wherever it is
            lines["save"] = round(held + sum(self.facts.estimate.save_gpu_mib.values()), 1)
        card = self.facts.capacity_mib
        return {"name": "estimate", "kind": "estimate", "limit_source": "estimate",
                "limit_mib": None if not card else round(float(card), 1), "used_mib": None, "left_mib": None,
                "run_mib": None, "peak_mib": None, "others": [], "phase_lines_mib": lines}  # fmt: skip

    def _held(self, pool: Pool) -> float:
        """What the run holds for good in this memory: used now, less the room a coming phase can reuse."""
        return pool.limit_mib - self.engine.left_mib(pool) - self.engine.reusable_mib(pool)

    def _phase_lines(self, pool: Pool, save_coming: bool) -> dict[str, float]:
        """Where each coming phase would put this memory: what is held now plus the estimate's extra."""
        base = self._held(pool)
        lines = {}
        if self.plan.eval_extra_mib is not None:
            lines["eval"] = round(base + self.plan.eval_extra_mib, 1)
        if self.plan.train_extra_mib is not None:
            lines["longest_batch"] = round(base + self.plan.train_extra_mib, 1)
        if save_coming:
            parts = self.plan.save_gpu_parts if pool.kind == "gpu" else self.plan.save_host_parts
            lines["save"] = round(base + sum(parts.values()), 1)
        return lines
