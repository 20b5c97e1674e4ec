"""Start-up cost of the headless verbs: wall time of whole `oomdoctor ...` processes on the bundled demo case,
and which heavy modules each one imported (none should).

    python benchmarks/bench_startup.py [--repeats 7]

Prints the median and the best of N runs per command. The issue's bar: `diagnose --json` on a small case well
under half a second; `estimate` answers in under 50 ms once Python is up (see bench_estimate.py for that part).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "keywords_clean_train.yaml"
LOG = ROOT / "configs" / "demo" / "train.log"
LENGTHS = ROOT / "configs" / "demo" / "lengths.json"
HEAVY = ("torch", "transformers", "datasets", "llamafactory", "textual")

COMMANDS = {
    "python -c pass (interpreter alone)": ["-c", "pass"],
    "oomdoctor --help": ["-m", "oomdoctor.cli", "--help"],
    "oomdoctor diagnose --json": ["-m", "oomdoctor.cli", "diagnose", "--config", str(CONFIG), "--log", str(LOG), "--json"],
    "oomdoctor diagnose --lengths (text)": [
        "-m", "oomdoctor.cli", "diagnose", "--config", str(CONFIG), "--log", str(LOG), "--lengths", str(LENGTHS),
    ],
    "oomdoctor estimate --json": ["-m", "oomdoctor.cli", "estimate", "--config", str(CONFIG), "--gpu", "V100-32GB", "--json"],
}

PROBE = """
import runpy, sys, json
sys.argv = ["oomdoctor"] + sys.argv[1:]
try:
    runpy.run_module("oomdoctor.cli", run_name="__main__")
except SystemExit:
    pass
heavy = sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(__HEAVY_LIST__)))
sys.stderr.write("HEAVY=" + json.dumps(heavy) + "\\n")
"""


def wall_s(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def heavy_modules(args: list[str]) -> list[str]:
    if args[:1] != ["-m"]:
        return []
    code = PROBE.replace("__HEAVY_LIST__", repr(json.dumps(HEAVY)))
    out = subprocess.run([sys.executable, "-c", code, *args[2:]], capture_output=True, text=True, check=False)
    for line in out.stderr.splitlines():
        if line.startswith("HEAVY="):
            return json.loads(line[6:])
    return ["?"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"{'command':40} {'median':>9} {'best':>9}  heavy modules imported")
    for name, argv in COMMANDS.items():
        wall_s(argv)  # warm the file cache
        times = [wall_s(argv) for _ in range(args.repeats)]
        heavy = heavy_modules(argv)
        print(f"{name:40} {statistics.median(times) * 1000:7.0f} ms {min(times) * 1000:7.0f} ms  {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
