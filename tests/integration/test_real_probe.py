"""Probe trials, calibration and fit for real: ``llamafactory-cli train`` on the tiny Qwen3 (vocabulary 16k), on a
dataset whose long rows come last, under an address-space cap (``prlimit --as``) on this CPU machine.

- A plain 3-step trial of the config passes under the cap: its first steps see short rows only.
- The 3-step probe of the same config under the same cap runs out at the longest batch (the derived dataset puts
  the long rows first), and ``diagnose`` on the probe's own log places it and proposes the course's change.
- A probe at micro-batch 1 without the cap calibrates the estimate (CPU RSS): the fitted constants reproduce its
  own peaks within 5 %; ``estimate`` and ``diagnose`` say they use it.
- ``fit`` under the cap, calibrated by that probe, finds a batch with the effective batch kept using at most two
  probes; the calibrated estimate predicts the verifying probe (another batch size) within 10 %; a full epoch of
  the winner then passes under the same cap.

The cap is the address space the same command needs up to "Running training" (measured here) plus a slack
the short batches fit in and the batch of the four long rows (about 4 x 1.3k tokens x 16k x 4 B per logits
buffer) does not.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fixtures.address_space import load_address_space_mib
from fixtures.commands import offline_env, oomdoctor
from fixtures.tiny_qwen3 import build_tiny_qwen3, tiny_train_config, write_tiny_dataset

pytestmark = pytest.mark.integration

VOCAB = 16384
BATCH = 4
SHORT_ROWS = 40
SLACK_MIB = 700  # above loading: a short batch needs ~0.1 GiB, batch 2 of the long rows ~0.5, batch 4 ~1.0


@pytest.fixture(scope="module")
def world(llamafactory_cli: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The model, the late-long dataset, the user's config, the cap, and an offline environment."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    root = tmp_path_factory.mktemp("probe")
    model = build_tiny_qwen3(root / "model", vocab_size=VOCAB)
    data = write_tiny_dataset(root / "data", n=SHORT_ROWS, n_val=4, words_per_sample=(8, 30))
    long = write_tiny_dataset(root / "long", n=4, n_val=0, words_per_sample=(700, 900), seed=1)
    rows = json.loads((data / "tiny_train.json").read_text()) + json.loads(
        (long / "tiny_train.json").read_text()
    )
    (data / "tiny_train.json").write_text(json.dumps(rows), encoding="utf-8")
    config = tiny_train_config(model, data, root / "saves", steps=3, batch=BATCH, cutoff_len=2048)
    config.update(
        {"disable_shuffling": True, "per_device_eval_batch_size": BATCH}
    )  # the file's order: long rows last
    path = root / "train.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    hf = root / "hf"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(hf)}
    measure = root / "measure.yaml"
    measure.write_text(yaml.safe_dump({**config, "output_dir": str(root / "measure-out")}), encoding="utf-8")
    cap_mib = load_address_space_mib([str(llamafactory_cli), "train", str(measure)], env) + SLACK_MIB
    plain = f"{offline_env(hf)} {shlex.quote(str(llamafactory_cli))} train"
    capped = f"{offline_env(hf)} {prlimit} --as={cap_mib * 2**20} {shlex.quote(str(llamafactory_cli))} train"
    return {"root": root, "config": config, "path": path, "cap_mib": cap_mib, "plain": plain, "capped": capped,
            "cli": llamafactory_cli, "prlimit": prlimit, "env": env}  # fmt: skip


def _config_with(world: dict[str, Any], name: str, **changes: Any) -> Path:
    """The user's config with some keys changed (None: removed)."""
    raw = {k: v for k, v in {**world["config"], **changes}.items() if v is not None}
    path = world["root"] / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def _oomdoctor(world: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    # calibrations go to the suite's own user cache (tests/conftest.py), inherited by the subprocess
    return oomdoctor(*args, timeout_s=600)


def _result(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "result.json").read_text(encoding="utf-8"))


def test_a_probe_meets_the_late_long_rows_that_a_plain_trial_misses(world: dict[str, Any]) -> None:
    root, config = world["root"], str(world["path"])
    plain = _oomdoctor(world, "trial", "--config", config, "--steps", "3", "--out", str(root / "plain"),
                       "--launcher", world["capped"], "--timeout", "300")  # fmt: skip
    assert plain.returncode == 0, f"cap {world['cap_mib']} MiB\n{plain.stdout}{plain.stderr}"
    assert _result(root / "plain")["steps_done"] == 3

    probe = _oomdoctor(world, "trial", "--config", config, "--probe", "--steps", "3", "--out", str(root / "probe"),
                       "--launcher", world["capped"], "--timeout", "300")  # fmt: skip
    log = (root / "probe" / "train.log").read_text(encoding="utf-8")
    assert probe.returncode == 1, f"{probe.stdout}{probe.stderr}\n{log[-3000:]}"
    result = _result(root / "probe")
    assert result["oom"] is True and result["steps_done"] == 0
    marks = {m["name"]: m for m in result["milestones"]}
    assert marks["load"]["passed"] is True
    assert marks["longest_batch"]["passed"] is False and marks["longest_batch"]["reached"] is True
    assert marks["save"]["reached"] is False and result["probe_passed"] is False
    assert result["probe"]["longest_tokens"] > 1000 and result["probe"]["train"][0]["first_lengths"][0] > 1000
    assert "FAILED  longest micro-batch forward/backward" in probe.stdout
    assert "calibration" not in result  # a failed probe is capped by what it ran out of: no calibration
    assert json.loads((world["root"] / "data" / "dataset_info.json").read_text()).keys() == {
        "tiny_train",
        "tiny_val",
    }

    diagnosed = _oomdoctor(world, "diagnose", "--config", str(root / "probe" / "config.yaml"),
                           "--log", str(root / "probe" / "train.log"), "--json")  # fmt: skip
    assert diagnosed.returncode in (0, 1), diagnosed.stderr
    diagnosis = json.loads(diagnosed.stdout)
    assert diagnosis["oom"] is True and diagnosis["phase"] in ("first_batch", "long_sample"), diagnosis[
        "phase"
    ]
    proposal = diagnosis["proposal"]
    assert proposal is not None and proposal["rule"].endswith("halve_micro_batch"), proposal
    assert proposal["changes"]["per_device_train_batch_size"] == [BATCH, BATCH // 2]
    assert proposal["changes"]["gradient_accumulation_steps"] == [1, 2]


def test_a_probe_calibrates_and_fit_finds_a_batch_that_survives_a_full_epoch(world: dict[str, Any]) -> None:
    from oomdoctor.estimate.calibrate import Calibration, predicted, probe_lengths, probe_points, split_phases
    from oomdoctor.facts.config import read_config
    from oomdoctor.facts.model import read_model

    root = world["root"]
    # the user's run: one full epoch, validating and saving at its end
    user = _config_with(world, "epoch", max_steps=None, eval_steps=100, save_steps=100)
    small = _config_with(world, "b1", max_steps=None, eval_steps=100, save_steps=100, per_device_train_batch_size=1,
                         gradient_accumulation_steps=BATCH)  # fmt: skip
    probe = _oomdoctor(world, "trial", "--config", str(small), "--probe", "--out", str(root / "cal-b1"),
                       "--launcher", world["plain"], "--timeout", "300")  # fmt: skip
    assert probe.returncode == 0, probe.stdout + probe.stderr
    calibration = Calibration.from_json(
        json.loads((root / "cal-b1" / "calibration.json").read_text(encoding="utf-8"))
    )
    assert _result(root / "cal-b1")["calibration"]["from_calibration"] == calibration.fitted
    assert {"activation_scale", "context_mib"} <= set(calibration.fitted)
    for point in calibration.points:  # the fitted constants reproduce the peaks they came from
        assert point["after_mib"] == pytest.approx(point["measured_mib"], rel=0.05), point

    shown = _oomdoctor(world, "estimate", "--config", str(user), "--json")
    assert shown.returncode == 0, shown.stderr
    estimate = json.loads(shown.stdout)
    assert estimate["calibration"] is not None, "the same setting's calibration is used"
    assert set(estimate["calibration"]["from_calibration"]) >= {"activation_scale", "context_mib"}
    assert "calibrated by trial" in estimate["calibration"]["text"]["en"]
    diagnosed = _oomdoctor(world, "diagnose", "--config", str(root / "cal-b1" / "config.yaml"), "--log",
                           str(root / "cal-b1" / "train.log"), "--json")  # fmt: skip
    findings = {f["id"]: f for f in json.loads(diagnosed.stdout)["findings"]}
    assert "calibrated by trial" in findings["estimate.calibrated"]["text"]["en"]

    budget = calibration.constants["context_mib"] + SLACK_MIB  # the cap above loading, in resident terms
    out = root / "fit"
    done = _oomdoctor(world, "fit", "--config", str(user), "--out", str(out), "--gpu-mib", f"{budget:.0f}",
                      "--margin", "0.05", "--launcher", world["capped"], "--timeout", "300", "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    fitted = json.loads(done.stdout)
    assert fitted["ok"] and 1 <= fitted["probes"] <= 2
    tried = [(t["candidate"]["micro_batch"], t["candidate"]["accumulation"], t["candidate"]["eval_batch"])
             for t in fitted["tried"]]  # fmt: skip
    assert len(set(tried)) == len(tried)
    winner = fitted["winner"]
    assert winner["micro_batch"] < BATCH and fitted["effective_batch_kept"] is True
    assert winner["micro_batch"] * winner["accumulation"] == BATCH
    ran = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    assert ran["per_device_train_batch_size"] == winner["micro_batch"]
    assert (out / "change.json").is_file() and (out / "config.diff").read_text().startswith("---")

    # the estimate calibrated at micro-batch 1 predicts the winner's probe (another batch size) within 10 %
    verified = Path(fitted["tried"][-1]["folder"]) / "probe"
    record = _result(verified)
    config = read_config(verified / "config.yaml")
    phases = split_phases(config, read_model(config), probe_lengths(record))
    train = next(p for p in probe_points(record, phases) if p.phase == "train")
    assert predicted(train, calibration.constants) == pytest.approx(train.measured_mib, rel=0.10)

    epoch = subprocess.run([world["prlimit"], f"--as={world['cap_mib'] * 2**20}", str(world["cli"]), "train",
                            str(out / "config.yaml")], capture_output=True, text=True, env=world["env"],
                           cwd=root, timeout=600)  # fmt: skip
    assert epoch.returncode == 0, epoch.stdout[-3000:] + epoch.stderr[-3000:]
    assert "***** train metrics *****" in epoch.stdout + epoch.stderr
