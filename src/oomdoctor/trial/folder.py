"""A trial folder as one value: where each of its files lives, named in one place.

``oomdoctor trial`` writes, and ``compare``, ``fit``, the calibration and the app read, the same few files:
``config.yaml`` (what ran), ``change.json`` (the change being tried, copied from the patch folder),
``train.log``, ``gpu-samples.csv``, ``result.json``, the trial's own ``output/`` (LLaMA-Factory's
``output_dir``, holding ``trainer_log.jsonl`` and the checkpoints) and, for a probe, ``probe-data/`` (the
derived dataset) and ``calibration.json``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CONFIG = "config.yaml"
CHANGE = "change.json"
LOG = "train.log"
SAMPLES = "gpu-samples.csv"
RESULT = "result.json"
OUTPUT = "output"
TRAINER_LOG = "trainer_log.jsonl"  # LLaMA-Factory's per-log-step record in output_dir
PROBE_DATA = "probe-data"
CALIBRATION = "calibration.json"


@dataclass(frozen=True)
class TrialFolder:
    """The paths of one trial folder (which may not exist yet)."""

    path: Path

    @classmethod
    def at(cls, path: str | os.PathLike[str]) -> TrialFolder:
        return cls(Path(path).expanduser())

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def change(self) -> Path:
        return self.path / CHANGE

    @property
    def log(self) -> Path:
        return self.path / LOG

    @property
    def samples(self) -> Path:
        return self.path / SAMPLES

    @property
    def result(self) -> Path:
        return self.path / RESULT

    @property
    def output_dir(self) -> Path:
        return self.path / OUTPUT

    @property
    def trainer_log(self) -> Path:
        return self.output_dir / TRAINER_LOG

    @property
    def probe_data(self) -> Path:
        return self.path / PROBE_DATA

    @property
    def calibration(self) -> Path:
        return self.path / CALIBRATION

    @property
    def name(self) -> str:
        return self.path.name

    def is_trial(self) -> bool:
        """A folder a trial finished writing (it has its ``result.json``)."""
        return self.result.is_file()

    def checkpoints(self) -> list[str]:
        """``checkpoint-N`` folders in the trial's output, in step order."""

        def step(name: str) -> int:
            tail = name.rsplit("-", 1)[-1]
            return int(tail) if tail.isdigit() else 0

        found = (p.name for p in self.output_dir.glob("checkpoint-*") if p.is_dir())
        return sorted(found, key=step)
