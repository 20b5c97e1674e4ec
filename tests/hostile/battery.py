"""The hostile inputs, as data: each case builds its files in an empty folder and returns the command line.

A case is one broken or hostile thing a real user's folder could hold (a FIFO where a config should be, a
sparse 1.5 GB "config", a YAML alias bomb, a 5,000-digit batch size, a half-written result.json, a
``change.json`` that sets PATH, a dangling ``--out`` link...), put in one place a verb reads (a slot), with
every other input valid. The promise for each: the exit code given (2 for bad input, unless the input is an
optional fact the tool does without), stderr at most one line and never a traceback, under 5 s and 1 GiB,
and nothing in the folder modified.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
VALID_LOG = (PROJECT / "tests" / "rules" / "logs" / "first_batch.txt").read_text(encoding="utf-8")
VALID_CONFIG = """\
model_name_or_path: Qwen/Qwen3-0.6B
stage: sft
do_train: true
finetuning_type: lora
dataset: keywords_train
template: qwen3
cutoff_len: 2048
output_dir: saves/run
per_device_train_batch_size: 4
gradient_accumulation_steps: 8
num_train_epochs: 3
fp16: true
"""
VALID_RESULT = {"schema": 1, "outcome": "ok", "ok": True, "exit_code": 0, "wall_s": 12.5, "peak_memory_mib": 1234.0,
                "peak_source": "host_rss", "steps_done": 3, "steps_requested": 3, "warnings": [], "checkpoints": []}  # fmt: skip
VALID_CSV = (
    "time_s,gpu,memory_used_mib,memory_total_mib,util_pct,power_w\n0.2,host,100.0,,,\n0.4,host,120.5,,,\n"
)
SPARSE_BYTES = 1536 << 20  # 1.5 GiB, no disk used
GOOD = frozenset({0, 1})  # a diagnosis ran: 1 = it found the OOM in the valid log
BAD = frozenset({2})

Maker = Callable[[Path, str], Path]  # writes one (hostile) file into a folder under a name, returns its path


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path], list[str]]
    expect: frozenset[int] = BAD
    log_reader: bool = False  # the log reader's own items (the bigl work)
    tags: tuple[str, ...] = field(default=())


# --- file makers -------------------------------------------------------------------------------------------


def text(content: str | bytes) -> Maker:
    def make(folder: Path, name: str) -> Path:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return path

    return make


def missing(folder: Path, name: str) -> Path:
    return folder / name


def a_folder(folder: Path, name: str) -> Path:
    path = folder / name
    path.mkdir(parents=True)
    return path


def fifo(folder: Path, name: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def device(folder: Path, name: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to("/dev/zero")  # a character device that never ends
    return path


def dangling(folder: Path, name: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(folder / "nowhere" / "at-all")
    return path


def a_socket(folder: Path, name: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
    return path


def sparse(head: bytes = b"") -> Maker:
    def make(folder: Path, name: str) -> Path:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(SPARSE_BYTES)
        return path

    return make


def newline_name(maker: Maker) -> Maker:
    def make(folder: Path, name: str) -> Path:
        return maker(folder, name.replace(".", "\nx.", 1))

    return make


FILE_KINDS: dict[str, Maker] = {
    "missing": missing,
    "folder": a_folder,
    "fifo": fifo,
    "device": device,
    "socket": a_socket,
    "dangling_link": dangling,
    "sparse_1_5g": sparse(),
    "sparse_1_5g_text_head": sparse(b"a: 1\nb: 2\n"),
    "empty": text(""),
    "binary": text(bytes(range(256)) * 64),
    "not_utf8": text("a: 1\n# caf\xe9 \xff\xfe\n".encode("latin-1")),
    "fifo_newline_name": newline_name(fifo),
    "missing_newline_name": newline_name(missing),
}


# --- YAML contents ----------------------------------------------------------------------------------------


def _alias_bomb() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return VALID_CONFIG + "\n".join(lines) + "\n"


def _with(key: str, value: str) -> str:
    kept = [line for line in VALID_CONFIG.splitlines() if not line.startswith(f"{key}:")]
    return "\n".join([*kept, f"{key}: {value}"]) + "\n"


YAML_KINDS: dict[str, str | bytes] = {
    "alias_bomb": _alias_bomb(),
    "alias_bomb_in_value": VALID_CONFIG.replace("fp16: true", "")
    + "x: &x [1,2,3,4,5,6,7,8,9,10]\n"
    + "".join(f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}" if i else "*x"] * 10) + "]\n" for i in range(8)),
    "recursive_alias": VALID_CONFIG + "loop: &loop [*loop]\n",
    "deep_list": VALID_CONFIG + "deep: " + "[" * 20000 + "]" * 20000 + "\n",
    "deep_mapping": VALID_CONFIG + "deep: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
    "batch_5000_digits": _with("per_device_train_batch_size", "9" * 5000),
    "batch_30_digits": _with("per_device_train_batch_size", "1" * 30),
    "accumulation_320_digits": _with("gradient_accumulation_steps", "7" * 320),
    "batch_1e309": _with("per_device_train_batch_size", "1e309"),
    "batch_nan": _with("per_device_train_batch_size", ".nan"),
    "cutoff_inf": _with("cutoff_len", ".inf"),
    "batch_negative": _with("per_device_train_batch_size", "-4"),
    "accumulation_zero": _with("gradient_accumulation_steps", "0"),
    "batch_list": _with("per_device_train_batch_size", "[4, 8]"),
    "batch_mapping": _with("per_device_train_batch_size", "{a: 1}"),
    "batch_word": _with("per_device_train_batch_size", "four"),
    "batch_string_huge": _with("per_device_train_batch_size", '"' + "9" * 4400 + '"'),
    "lora_rank_1e9": _with("lora_rank", "1000000000"),
    "samples_per_update_2_pow_40": _with("per_device_train_batch_size", str(1 << 20)).replace(
        "gradient_accumulation_steps: 8", f"gradient_accumulation_steps: {1 << 20}"
    ),
    "cutoff_2_pow_40": _with("cutoff_len", str(2**40)),
    "val_size_1e309": _with("val_size", "1e309"),
    "epochs_nan": _with("num_train_epochs", ".nan"),
    "epochs_5000_digits": _with("num_train_epochs", "1" * 5000),
    "eval_batch_string_1e400": _with("per_device_eval_batch_size", '"1e400"'),
    "bad_timestamp": _with("per_device_train_batch_size", "2001-13-45"),
    "python_tag": VALID_CONFIG + "x: !!python/object/apply:os.system ['true']\n",
    "top_level_list": "- a\n- b\n",
    "scalar_document": "just some words\n",
    "two_documents": VALID_CONFIG + "---\n" + VALID_CONFIG,
    "tab_indent": "model_name_or_path: x\n\tstage: sft\n",
    "llamaboard_file": "top.model_name: Qwen3\ntop.finetuning_type: lora\ntrain.batch_size: 4\ntrain.cutoff_len: 1024\n",
    "nul_after_bom": b"\xef\xbb\xbf" + VALID_CONFIG.encode() + b"\x00\x00",
    "flag_as_number": _with("fp16", "7"),
    "deepspeed_inline_deep": _with("deepspeed", "'" + '{"a":' * 5000 + "1" + "}" * 5000 + "'"),
    "deepspeed_inline_nan": _with("deepspeed", """'{"zero_optimization": {"stage": NaN}}'"""),
    "deepspeed_path_too_long": _with("deepspeed", "x" * 5000 + ".json"),
}


# --- JSON contents ------------------------------------------------------------------------------------------

JSON_KINDS: dict[str, str] = {
    "deep_array": "[" * 100000 + "]" * 100000,
    "deep_object": '{"a":' * 3000 + "1" + "}" * 3000,
    "nan": '{"max_tokens": NaN, "peak_memory_mib": NaN, "zero_optimization": {"stage": NaN}}',
    "infinity": '{"max_tokens": Infinity, "peak_memory_mib": -Infinity}',
    "float_1e400": '{"max_tokens": 1e400, "peak_memory_mib": 1e400, "hidden_size": 1e400}',
    "int_5000_digits": '{"max_tokens": ' + "9" * 5000 + "}",
    "top_level_list": "[1, 2, 3]",
    "half_written": '{"outcome": "ok", "peak_memory_mib": 12',
}


def json_file(content: str) -> Maker:
    return text(content)


# --- valid surroundings ------------------------------------------------------------------------------------


def valid_config(folder: Path, name: str = "train.yaml", content: str = VALID_CONFIG) -> Path:
    return text(content)(folder, name)


def valid_log(folder: Path) -> Path:
    return text(VALID_LOG)(folder, "train.log")


def trial_folder(folder: Path, name: str = "trial-a", **files: Maker | None) -> Path:
    """A trial folder with valid result.json, config.yaml, change.json and samples; ``files`` replaces one."""
    trial = folder / name
    trial.mkdir(parents=True, exist_ok=True)
    defaults: dict[str, Maker] = {
        "result.json": text(json.dumps(VALID_RESULT)),
        "config.yaml": text(VALID_CONFIG),
        "change.json": text(json.dumps({"rule": "r", "title": {"en": "t", "zh": "t"}, "changes": {}})),
        "gpu-samples.csv": text(VALID_CSV),
    }
    for file_name, maker in {**defaults, **files}.items():
        if maker is not None:
            maker(trial, file_name)
    return trial


# --- slots: where a verb reads a file ------------------------------------------------------------------------

Slot = Callable[[Path, Maker], list[str]]


def _s(path: Path) -> str:
    return str(path)


def config_slots() -> dict[str, Slot]:
    """Every verb's ``--config`` (and both sides of ``compare OLD.yaml NEW.yaml``)."""
    return {
        "diagnose": lambda d, m: ["diagnose", "--config", _s(m(d, "train.yaml")), "--log", _s(valid_log(d))],
        "estimate": lambda d, m: ["estimate", "--config", _s(m(d, "train.yaml")), "--gpu-mib", "32768"],
        "patch": lambda d, m: [
            "patch",
            "--config",
            _s(m(d, "train.yaml")),
            "--log",
            _s(valid_log(d)),
            "--out",
            _s(d / "new"),
        ],
        "trial": lambda d, m: [
            "trial",
            "--config",
            _s(m(d, "train.yaml")),
            "--out",
            _s(d / "t"),
            "--launcher",
            "/bin/false",
            "--timeout",
            "4",
        ],
        "lengths": lambda d, m: ["lengths", "--config", _s(m(d, "train.yaml"))],
        "compare_old": lambda d, m: ["compare", _s(m(d, "old.yaml")), _s(valid_config(d, "new.yaml"))],
        "compare_new": lambda d, m: ["compare", _s(valid_config(d, "old.yaml")), _s(m(d, "new.yaml"))],
        "tui": lambda d, m: ["tui", "--config", _s(m(d, "train.yaml"))],
        "fit": lambda d, m: [
            "fit",
            "--config",
            _s(m(d, "train.yaml")),
            "--out",
            _s(d / "new"),
            "--gpu-mib",
            "32768",
            "--launcher",
            "/bin/false",
            "--timeout",
            "4",
        ],
    }


def _with_deepspeed(d: Path, m: Maker) -> list[str]:
    ds = m(d, "ds.json")
    config = valid_config(d, content=VALID_CONFIG + f"deepspeed: {json.dumps(str(ds))}\n")
    return ["diagnose", "--config", _s(config), "--log", _s(valid_log(d))]


def _lengths_arg(d: Path, m: Maker) -> list[str]:
    return [
        "diagnose",
        "--config",
        _s(valid_config(d)),
        "--log",
        _s(valid_log(d)),
        "--lengths",
        _s(m(d, "lengths.json")),
    ]


def _estimate_lengths(d: Path, m: Maker) -> list[str]:
    return [
        "estimate",
        "--config",
        _s(valid_config(d)),
        "--gpu-mib",
        "32768",
        "--lengths",
        _s(m(d, "lengths.json")),
    ]


def _result_json(d: Path, m: Maker) -> list[str]:
    trial = trial_folder(d, **{"result.json": None})
    m(trial, "result.json")
    return ["compare", _s(trial)]


def _change_json_compare(d: Path, m: Maker) -> list[str]:
    trial = trial_folder(d, **{"change.json": None})
    m(trial, "change.json")
    return ["compare", _s(trial)]


def _config_yaml_compare(d: Path, m: Maker) -> list[str]:
    trial = trial_folder(d, **{"config.yaml": None})
    m(trial, "config.yaml")
    return ["compare", _s(trial_folder(d, "trial-0")), _s(trial)]


def _samples_csv(d: Path, m: Maker) -> list[str]:
    no_peak = {k: v for k, v in VALID_RESULT.items() if k not in ("peak_memory_mib", "peak_source")}
    trial = trial_folder(d, **{"result.json": text(json.dumps(no_peak)), "gpu-samples.csv": None})
    m(trial, "gpu-samples.csv")
    return ["compare", _s(trial)]


def _change_json_trial(d: Path, m: Maker) -> list[str]:
    patched = d / "patched"
    config = valid_config(patched, "config.yaml")
    m(patched, "change.json")
    return [
        "trial",
        "--config",
        _s(config),
        "--out",
        _s(d / "t"),
        "--launcher",
        "/bin/false",
        "--timeout",
        "4",
    ]


def _dataset_info(d: Path, m: Maker) -> list[str]:
    model = d / "model"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}")
    m(d / "data", "dataset_info.json")
    config = valid_config(
        d, content=VALID_CONFIG.replace("Qwen/Qwen3-0.6B", str(model)) + f"dataset_dir: {d / 'data'}\n"
    )
    return ["lengths", "--config", _s(config)]


JSON_SLOTS: dict[str, Slot] = {
    "deepspeed_json": _with_deepspeed,
    "lengths_file": _lengths_arg,
    "estimate_lengths_file": _estimate_lengths,
    "result_json": _result_json,
    "change_json_compare": _change_json_compare,
    "change_json_trial": _change_json_trial,
    "dataset_info_json": _dataset_info,
}
OTHER_FILE_SLOTS: dict[str, Slot] = {
    "trial_config_yaml": _config_yaml_compare,
    "gpu_samples_csv": _samples_csv,
    "log": lambda d, m: ["diagnose", "--config", _s(valid_config(d)), "--log", _s(m(d, "train.log"))],
    "tui_log": lambda d, m: ["tui", "--log", _s(m(d, "train.log"))],
}


def _model_config_json(d: Path, m: Maker) -> list[str]:
    model = d / "Qwen3-0.6B"
    model.mkdir()
    m(model, "config.json")
    config = valid_config(d, content=VALID_CONFIG.replace("Qwen/Qwen3-0.6B", str(model)))
    return ["diagnose", "--config", _s(config), "--log", _s(valid_log(d))]


# Where an unusable file is an optional fact the tool does without, the diagnosis still runs (exit 0 or 1):
# a model config.json it cannot use falls back to the built-in table; a DeepSpeed path with nothing there
# is read by its name (ds_z3_offload_config.json says what it holds), as LLaMA-Factory's own names do.
GOOD_WHEN_ABSENT = {("deepspeed_json", "missing"), ("deepspeed_json", "missing_newline_name"),
                    ("deepspeed_json", "folder")}  # fmt: skip
EXPECT_OVERRIDE: dict[tuple[str, str], frozenset[int]] = {}


def _file_kind_cases() -> list[Case]:
    cases = []
    slots = {**config_slots(), **JSON_SLOTS, **OTHER_FILE_SLOTS}
    fixed_names = {"result_json", "change_json_compare", "change_json_trial", "dataset_info_json",
                   "trial_config_yaml", "gpu_samples_csv"}  # fmt: skip
    for slot_name, slot in slots.items():
        for kind, maker in FILE_KINDS.items():
            if slot_name in fixed_names and "newline_name" in kind:
                continue  # the tool looks for this file by its fixed name, so a renamed one is not it
            expect = GOOD if (slot_name, kind) in GOOD_WHEN_ABSENT else BAD
            if slot_name in ("change_json_compare",) and kind in ("missing", "missing_newline_name"):
                continue  # a trial without change.json is an ordinary trial
            if slot_name == "change_json_trial" and kind in ("missing", "missing_newline_name"):
                continue  # a config without change.json is an ordinary config
            if slot_name == "dataset_info_json" and kind in ("missing", "missing_newline_name"):
                continue  # then LLaMA-Factory itself is asked (and the tokenizer here is not real)
            if slot_name == "gpu_samples_csv" and kind in ("missing", "empty"):
                expect = frozenset(
                    {0}
                )  # no samples (a trial killed before its first one): the table shows "-"
            if slot_name == "trial_config_yaml" and kind in ("missing", "missing_newline_name"):
                expect = frozenset({0})
            if slot_name == "tui_log" and kind not in (
                "missing",
                "missing_newline_name",
                "folder",
                "fifo",
                "device",
                "socket",
                "dangling_link",
                "fifo_newline_name",
            ):
                continue  # a regular file opens the app, which reads the log itself
            if slot_name == "log" and kind == "not_utf8":
                expect = GOOD  # logs come in GBK and Latin-1 too: the reader decodes them, nothing to refuse
            cases.append(
                Case(f"{slot_name}-{kind}", _bind(slot, maker), expect, log_reader=slot_name == "log")
            )
    for kind, maker in {k: FILE_KINDS[k] for k in ("fifo", "sparse_1_5g", "binary", "device")}.items():
        cases.append(Case(f"model_config_json-{kind}", _bind(_model_config_json, maker), GOOD))
    return cases


def _bind(slot: Slot, maker: Maker) -> Callable[[Path], list[str]]:
    return lambda folder: slot(folder, maker)


def _yaml_cases() -> list[Case]:
    cases = []
    verbs = config_slots()
    for kind, content in YAML_KINDS.items():
        for verb in ("diagnose", "estimate", "patch", "trial", "compare_new", "tui", "fit"):
            cases.append(Case(f"yaml-{kind}-{verb}", _bind(verbs[verb], text(content))))
    for kind in ("alias_bomb", "deep_list", "batch_5000_digits", "recursive_alias", "not_utf8"):
        content = YAML_KINDS.get(kind, "a: 1\n# caf\xe9\n".encode("latin-1"))
        cases.append(Case(f"yaml-{kind}-trial_folder_config", _bind(_config_yaml_compare, text(content))))
    return cases


# At the bounds, still accepted: the largest values must not make anything loop on the number (the fit
# search walks the divisors of batch x accumulation; 720,720 has 240 of them).
EXTREME_VALID = {
    "batch_720720": _with("per_device_train_batch_size", "720720").replace(
        "gradient_accumulation_steps: 8", "gradient_accumulation_steps: 1"
    ),
    "cutoff_2_pow_24": _with("cutoff_len", str(1 << 24)),
    "lora_rank_65536": _with("lora_rank", "65536"),
    "accumulation_2_pow_20": _with("gradient_accumulation_steps", str(1 << 20)).replace(
        "per_device_train_batch_size: 4", "per_device_train_batch_size: 1"
    ),
}


def _extreme_cases() -> list[Case]:
    verbs = config_slots()
    cases = []
    for kind, content in EXTREME_VALID.items():
        cases.append(Case(f"extreme-{kind}-diagnose", _bind(verbs["diagnose"], text(content)), GOOD))
        cases.append(
            Case(f"extreme-{kind}-estimate", _bind(verbs["estimate"], text(content)), frozenset({0}))
        )
    return cases


def _json_cases() -> list[Case]:
    cases = []
    for slot_name, slot in JSON_SLOTS.items():
        for kind, content in JSON_KINDS.items():
            cases.append(Case(f"json-{kind}-{slot_name}", _bind(slot, json_file(content))))
    wrong_types = {
        "result_json": ['{"peak_memory_mib": "lots"}', '{"wall_s": [1]}', '{"steps_done": "3"}',
                        '{"exit_code": 1e300}', '{"warnings": "x"}', '{"checkpoints": [1, 2]}',
                        '{"alloc_retries": -5}', '{"outcome": {"a": 1}}', '{"wall_s": 1e308, "peak_memory_mib": 1e300}'],
        "change_json_compare": ['{"title": 5}', '{"rule": ["a"]}', '{"changes": "x"}', '{"parent": {}}'],
        "change_json_trial": ['{"env": "PATH=/tmp"}', '{"env": {"PATH": "/tmp/evil"}}', '{"env": {"LD_PRELOAD": "x.so"}}',
                              '{"env": {"PYTHONPATH": "/tmp"}}', '{"env": {"PYTORCH_CUDA_ALLOC_CONF": 5}}',
                              '{"env": {"PYTORCH_CUDA_ALLOC_CONF": "a:b\\nPATH=/x"}}', '{"env": {"CUDA_VISIBLE_DEVICES": "1"}}',
                              '{"env": {"BASH_ENV": "/tmp/x"}}', '{"env": {"": "x"}}'],
        "lengths_file": ['{"max_tokens": "957"}', '{"max_tokens": 0}', '{"max_tokens": 957, "samples": -1}',
                         '{"max_tokens": 957.5}', '{"max_tokens": ' + str(2**60) + "}", '{"max_tokens": true}'],
        "dataset_info_json": ['{"keywords_train": {"file_name": "../../../../etc/passwd"}}',
                              '{"keywords_train": {"file_name": "/etc"}}',
                              '{"keywords_train": {"file_name": "../"}}'],
    }  # fmt: skip
    for slot_name, contents in wrong_types.items():
        for i, content in enumerate(contents):
            cases.append(Case(f"json-types{i}-{slot_name}", _bind(JSON_SLOTS[slot_name], json_file(content))))
    model_types = ['{"hidden_size": "big", "num_hidden_layers": 2}', '{"hidden_size": Infinity}',
                   '{"hidden_size": 1e400, "num_hidden_layers": 2}', '{"hidden_size": 1024, "num_hidden_layers": 28, "num_attention_heads": 0}',
                   '{"hidden_size": 1024, "num_hidden_layers": 28, "num_attention_heads": 16, "vocab_size": ' + "9" * 5000 + "}",
                   '{"model_type": ["x"], "hidden_size": 1024, "num_hidden_layers": 28, "architectures": {"a": 1}}',
                   "[" * 100000]  # fmt: skip
    for i, content in enumerate(model_types):
        cases.append(
            Case(f"json-types{i}-model_config_json", _bind(_model_config_json, json_file(content)), GOOD)
        )
    return cases


def _csv_cases() -> list[Case]:
    header = "time_s,gpu,memory_used_mib,memory_total_mib,util_pct,power_w\n"
    contents: dict[str, str | bytes] = {
        "field_200k": header + "0.2,host," + "9" * 200_000 + ",,,\n",
        "line_200k_quoted": header + '0.2,host,"' + "x" * 200_000 + '",,,\n',
        "memory_word": header + "0.2,host,lots,,,\n",
        "memory_nan": header + "0.2,host,nan,,,\n",
        "memory_inf": header + "0.2,host,inf,,,\n",
        "memory_negative": header + "0.2,host,-5,,,\n",
        "memory_5000_digits": header + "0.2,host," + "9" * 3000 + ",,,\n",
        "no_memory_column": "a,b\n1,2\n",
        "nul_bytes": header.encode() + b"0.2,host,\x00\x00,,,\n",
        "not_utf8": header.encode() + b"0.2,h\xffst,100,,,\n",
        "lone_carriage_return": header + "0.0,host,\r,,,\n",
    }
    return [Case(f"csv-{kind}", _bind(_samples_csv, text(content))) for kind, content in contents.items()]


# --- arguments ----------------------------------------------------------------------------------------------

BAD_NUMBERS = {"nan": "nan", "inf": "inf", "minus_inf": "-inf", "zero": "0", "negative": "-1", "1e309": "1e309",
               "empty": "", "word": "abc", "5000_digits": "9" * 5000, "newline": "1\n2"}  # fmt: skip


def _verb_base(verb: str) -> Callable[[Path], list[str]]:
    def base(d: Path) -> list[str]:
        config = _s(valid_config(d))
        return {
            "diagnose": ["diagnose", "--config", config, "--log", _s(valid_log(d))],
            "estimate": ["estimate", "--config", config],
            "patch": ["patch", "--config", config, "--log", _s(valid_log(d)), "--out", _s(d / "new")],
            "trial": ["trial", "--config", config, "--out", _s(d / "t"), "--launcher", "/bin/false"],
            "watch": ["watch", "--once"],
            "lengths": ["lengths", "--config", config],
            "tui": ["tui", "--config", config],
            "fit": ["fit", "--config", config, "--out", _s(d / "new"), "--launcher", "/bin/false"],
        }[verb]

    return base


NUMERIC_FLAGS = [("diagnose", "--gpu-mib"), ("diagnose", "--longest-tokens"), ("diagnose", "--eval-longest-tokens"),
                 ("estimate", "--gpu-mib"), ("estimate", "--longest-tokens"), ("patch", "--gpu-mib"),
                 ("trial", "--steps"), ("trial", "--timeout"), ("trial", "--interval"), ("watch", "--interval"),
                 ("lengths", "--cutoff"), ("tui", "--trial-steps"), ("tui", "--gpu-mib"), ("fit", "--gpu-mib"),
                 ("fit", "--margin"), ("fit", "--timeout")]  # fmt: skip


def _argument_cases() -> list[Case]:
    cases = []
    for verb, flag in NUMERIC_FLAGS:
        for name, value in BAD_NUMBERS.items():
            base = _verb_base(verb)
            cases.append(Case(f"arg-{verb}{flag}-{name}", lambda d, b=base, f=flag, v=value: [*b(d), f, v]))
    for verb, flag, value in [
        ("trial", "--interval", "1e-300"),
        ("watch", "--interval", "1e-9"),
        ("trial", "--timeout", "1e12"),
        ("trial", "--steps", "2.5"),
        ("trial", "--steps", "0x10"),
    ]:
        base = _verb_base(verb)
        cases.append(Case(f"arg-{verb}{flag}-{value}", lambda d, b=base, f=flag, v=value: [*b(d), f, v]))
    answers = {"no_equals": "phase", "no_key": "=eval", "no_value": "phase=", "newline_value": "phase=eval\nrm -rf /",
               "newline_key": "pha\nse=eval", "unknown_value": "phase=\x1b[31mred"}  # fmt: skip
    for name, value in answers.items():
        for verb in ("diagnose", "patch"):
            base = _verb_base(verb)
            cases.append(Case(f"answer-{verb}-{name}", lambda d, b=base, v=value: [*b(d), "--answer", v]))
    for verb in ("diagnose", "estimate", "lengths", "trial", "patch", "tui", "fit"):
        cases.append(
            Case(
                f"arg-{verb}-config_name_with_newline",
                lambda d, v=verb: [a.replace("train.yaml", "tr\nain.yaml") for a in _verb_base(v)(d)],
            )
        )
    cases.append(Case("arg-compare-mixed", lambda d: ["compare", _s(valid_config(d)), _s(trial_folder(d))]))
    cases.append(
        Case(
            "arg-compare-three_configs",
            lambda d: ["compare", *(_s(valid_config(d, f"{n}.yaml")) for n in "abc")],
        )
    )
    cases.append(Case("arg-compare-not_a_trial", lambda d: ["compare", _s(a_folder(d, "empty"))]))
    cases.append(
        Case(
            "arg-estimate-unknown_gpu",
            lambda d: ["estimate", "--config", _s(valid_config(d)), "--gpu", "x\ny"],
        )
    )
    cases.append(Case("arg-unknown_verb_newline", lambda d: ["diag\nnose"]))
    cases.append(Case("arg-unknown_flag", lambda d: ["diagnose", "--conf\nig", "x"]))
    return cases


# --- output folders -----------------------------------------------------------------------------------------


def _run_config(d: Path) -> Path:
    (d / "data").mkdir(exist_ok=True)
    (d / "model").mkdir(exist_ok=True)
    content = VALID_CONFIG.replace("saves/run", str(d / "saves" / "run")).replace(
        "Qwen/Qwen3-0.6B", str(d / "model")
    )
    return valid_config(d, content=content + f"dataset_dir: {d / 'data'}\n")


def _out_targets() -> dict[str, Callable[[Path], Path | str]]:
    def link_dangling(d: Path) -> Path:
        return dangling(d, "out-link")

    def link_to_dir(d: Path) -> Path:
        (d / "elsewhere").mkdir()
        (d / "out-link").symlink_to(d / "elsewhere")
        return d / "out-link"

    def inside_output_dir(d: Path) -> Path:
        (d / "saves" / "run").mkdir(parents=True)
        return d / "saves" / "run" / "new"

    def newline_existing(d: Path) -> Path:
        (d / "a\nb").mkdir()
        return d / "a\nb"

    def parent_is_file(d: Path) -> Path:
        (d / "file.txt").write_text("x")
        return d / "file.txt" / "new"

    return {
        "dangling_link": link_dangling,
        "link_to_folder": link_to_dir,
        "existing_folder": lambda d: a_folder(d, "exists"),
        "existing_file": lambda d: text("x")(d, "exists.txt"),
        "under_proc": lambda d: "/proc/oomdoctor-hostile/new",
        "under_sys": lambda d: "/sys/oomdoctor-hostile",
        "dev_null": lambda d: "/dev/null",
        "under_dev_shm": lambda d: "/dev/shm/oomdoctor-hostile-out",
        "inside_output_dir": inside_output_dir,
        "inside_dataset_dir": lambda d: d / "data" / "new",
        "inside_model_folder": lambda d: d / "model" / "new",
        "newline_existing": newline_existing,
        "parent_is_file": parent_is_file,
    }


def _out_cases() -> list[Case]:
    cases = []
    for name, target in _out_targets().items():
        cases.append(Case(f"out-patch-{name}", lambda d, t=target: ["patch", "--config", _s(_run_config(d)), "--log",
                                                                     _s(valid_log(d)), "--out", str(t(d))]))  # fmt: skip
        cases.append(Case(f"out-trial-{name}", lambda d, t=target: ["trial", "--config", _s(_run_config(d)), "--out",
                                                                     str(t(d)), "--launcher", "/bin/false"]))  # fmt: skip
    return cases


# --- the log reader (the bigl work's items) -------------------------------------------------------------------

_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {req} GiB. GPU 0 has a total capacity of "
        "31.74 GiB of which 1.20 GiB is free. Including non-PyTorch memory, this process has 30.52 GiB memory in use.\n")  # fmt: skip
LOG_KINDS: dict[str, str | bytes] = {
    "bar_100k": "  5%|" + "\u2588" * 100_000 + "\n",
    "bar_20k_unclosed": " 45%|" + "\u258d" * 20_000 + "| 9/20 [00:01<",
    "glued_bars_3000": " 10%|\u2588         | 1/10 [00:01<00:09,  1.00it/s]" * 3000
    + "\n"
    + _OOM.format(req="2.00"),
    "oom_5000_digits": _OOM.format(req="9" * 5000),
    "oom_400_digits_float": _OOM.format(req="9" * 400 + ".5"),
    "rank_prefix_huge": "[rank" + "9" * 5000 + "]: " + _OOM.format(req="2.00"),
    "pid_huge": _OOM.format(req="2.00") + "Process " + "9" * 5000 + " has 1.00 GiB memory in use.\n",
    "bar_total_huge": " 10%|\u2588   | 1/" + "9" * 5000 + " [00:01<00:09,  1.00it/s]\n",
    "endless_line_5mb": "x" * 5_000_000,
    "nul_heavy": "\x00" * 10_000 + _OOM.format(req="2.00"),
}


def _trainer_log(content: str) -> Callable[[Path], list[str]]:
    def build(d: Path) -> list[str]:
        out = d / "saves" / "run"
        out.mkdir(parents=True)
        (out / "trainer_log.jsonl").write_text(content)
        return ["diagnose", "--config", _s(valid_config(d)), "--log", _s(out / "trainer_log.jsonl")]

    return build


def _log_cases() -> list[Case]:
    cases = [Case(f"log-{kind}", _bind(OTHER_FILE_SLOTS["log"], text(content)), GOOD | BAD, log_reader=True)
             for kind, content in LOG_KINDS.items()]  # fmt: skip
    jsonl = {
        "deep": '{"current_steps": 1, "total_steps": 2, "loss": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
        "huge_numbers": '{"current_steps": ' + "9" * 5000 + ', "total_steps": 1e400, "loss": NaN}\n',
        "wrong_types": '{"current_steps": "1", "total_steps": [2], "loss": {"a": 1}, "epoch": "x"}\n',
    }
    cases += [
        Case(f"trainer_log-{kind}", _trainer_log(content), GOOD | BAD, log_reader=True)
        for kind, content in jsonl.items()
    ]
    return cases


def all_cases() -> list[Case]:
    cases = [*_file_kind_cases(), *_yaml_cases(), *_extreme_cases(), *_json_cases(), *_csv_cases(), *_argument_cases(), *_out_cases(),
             *_log_cases()]  # fmt: skip
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return cases
