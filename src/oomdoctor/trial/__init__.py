"""Short trials: launch a config for a few steps, sample memory, record the trial folder, compare trials.

- ``sampler``: the drift-corrected memory sampler (NVML, or the process tree's RSS without a GPU).
- ``runner``: ``run_trial`` writes config.yaml / change.json / train.log / gpu-samples.csv / result.json.
- ``compare``: ``compare_trials`` (the course's table) and ``compare_configs`` (field effects, one change at a time).
"""

from oomdoctor.trial.compare import compare_configs, compare_trials
from oomdoctor.trial.runner import TrialProgress, TrialResult, run_trial
from oomdoctor.trial.sampler import Sampler, SampleSnapshot

__all__ = [
    "Sampler",
    "SampleSnapshot",
    "TrialProgress",
    "TrialResult",
    "compare_configs",
    "compare_trials",
    "run_trial",
]
