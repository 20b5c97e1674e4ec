"""Real token lengths of the configured dataset, built exactly as LLaMA-Factory builds training samples.

The memory a batch needs depends on its longest sample, not on ``cutoff_len`` (the course's point), so we
tokenize the dataset with the config's template through LLaMA-Factory's own loader and dataset processor,
with the cutoff lifted so that we see each sample's full length, then count how many the real cutoff
would cut. llamafactory (and with it torch, transformers, datasets) is imported inside ``token_lengths``
only. The tokenizer must be on this machine: nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from oomdoctor import records
from oomdoctor.errors import BadInput, one_line
from oomdoctor.facts.types import ConfigFacts, DataFacts
from oomdoctor.i18n import in_lang, msg

Progress = Callable[[int, "int | None"], None]

# Large enough that no sample is truncated while we measure it.
_NO_CUTOFF = 10**9
# Samples handed to LLaMA-Factory's processor at a time (also how often progress is reported).
_BATCH = 256
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
# DataArguments we set ourselves, whatever the config says.
_FORCED_DATA_ARGS = {
    "cutoff_len": _NO_CUTOFF,
    "packing": False,
    "neat_packing": False,
    "streaming": False,
    "tokenized_path": None,
    "preprocessing_num_workers": None,
    "overwrite_cache": True,
}


def percentile(sorted_values: Sequence[int], fraction: float) -> int | None:
    """Nearest-rank percentile of already sorted values (``fraction`` in 0..1)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return int(sorted_values[min(rank, len(sorted_values)) - 1])


def summarise(
    train: Iterable[int], evaluation: Iterable[int] | None, cutoff_len: int, *, source: str
) -> DataFacts:
    """DataFacts from per-sample token counts (full lengths, before truncation)."""
    lengths = sorted(train)
    eval_lengths = sorted(evaluation) if evaluation is not None else []
    return DataFacts(
        source=source,
        samples=len(lengths),
        max_tokens=lengths[-1] if lengths else None,
        p50_tokens=percentile(lengths, 0.50),
        p95_tokens=percentile(lengths, 0.95),
        p99_tokens=percentile(lengths, 0.99),
        eval_samples=len(eval_lengths) if evaluation is not None else None,
        eval_max_tokens=eval_lengths[-1] if eval_lengths else None,
        cutoff_len=cutoff_len,
        truncated=sum(1 for n in lengths if n > cutoff_len),
    )


def local_model_dir(config: ConfigFacts) -> Path:
    """The folder holding the model's tokenizer on this machine (local path, HF or ModelScope cache)."""
    from oomdoctor.facts.model import find_config_json

    name = config.model_name_or_path
    if not name:
        raise BadInput(msg("len_no_model", None, path=config.path))
    base_dir = Path(config.path).parent if config.path and not config.path.startswith("<") else None
    candidates: list[Path] = []
    found = find_config_json(name, base_dir=base_dir)
    if found is not None:
        candidates.append(found.parent)
    candidates.append(Path(name).expanduser())
    if base_dir is not None:
        candidates.append(base_dir / name)
    for folder in candidates:
        if folder.is_dir() and any((folder / f).is_file() for f in _TOKENIZER_FILES):
            return folder
    raise BadInput(msg("len_no_tokenizer", None, model=name))


def _dataset_dir(config: ConfigFacts) -> str:
    """dataset_dir as LLaMA-Factory resolves it (the working directory), else beside the config file."""
    value = config.dataset_dir or "data"
    if Path(value).is_dir() or value.upper() == "ONLINE":
        return value
    if config.path and not config.path.startswith("<"):
        beside = Path(config.path).parent / value
        if beside.is_dir():
            return str(beside)
    raise BadInput(msg("len_no_dataset_dir", None, path=value))


def _lengths_of(model_inputs: dict[str, list[Any]]) -> list[int]:
    """Per-sample length from a processor's output: the longest of its token sequences (pairwise stages
    carry chosen and rejected, KTO a KL sequence)."""
    keys = [k for k in model_inputs if k.endswith("input_ids")]
    if not keys:
        return []
    count = len(model_inputs[keys[0]])
    return [max(len(model_inputs[k][i]) for k in keys) for i in range(count)]


def _measure(
    dataset: Any,
    encode: Callable[[dict[str, list[Any]]], list[int]],
    progress: Progress | None,
    done: int,
    total: int | None,
) -> tuple[list[int], int]:
    lengths: list[int] = []
    size = len(dataset)
    for start in range(0, size, _BATCH):
        lengths += encode(dataset[start : start + _BATCH])
        done += min(_BATCH, size - start)
        if progress is not None:
            progress(done, total)
    return lengths, done


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence LLaMA-Factory's INFO lines and datasets' progress bars while we count: the caller shows its
    own progress. Restores both afterwards."""
    import logging  # only when measuring, which imports the training stack anyway

    import datasets

    bars_were_off = datasets.is_progress_bar_enabled() is False
    datasets.disable_progress_bars()
    loggers = [logging.getLogger(name) for name in ("llamafactory", "datasets", "transformers")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
        if not bars_were_off:
            datasets.enable_progress_bars()


@records.record
class _Counter:
    """LLaMA-Factory's loader and the config's template, ready to count tokens per sample."""

    load: Callable[[list[str] | None, bool], Any]  # (names, per_name) -> merged dataset, or {name: dataset}
    encode: Callable[[dict[str, list[Any]]], list[int]]
    split: Callable[[Any, Any], tuple[dict[str, Any], dict[str, Any]]]


@contextlib.contextmanager
def _lf_counter(config: ConfigFacts) -> Iterator[_Counter]:
    """Set up LLaMA-Factory's loader, template and dataset processor for the config, with the cutoff lifted.

    BadInput (one line) when llamafactory is not installed, the tokenizer is not on this machine, or the
    dataset cannot be read.
    """
    model_dir, dataset_dir = _local_inputs(config)
    lf = _LfApi()
    data_kwargs = _data_kwargs(config, lf, dataset_dir)
    stage = config.stage if config.stage in ("pt", "sft", "rm", "ppo", "kto", "dpo") else "sft"
    stage_for_loader = "rm" if stage == "dpo" else stage

    import tempfile  # here, not at the top: a start that measures nothing does not pay for it

    with tempfile.TemporaryDirectory(prefix="oomdoctor-lengths-") as scratch, _quiet():
        args = _lf_args(config, lf, data_kwargs, model_dir, scratch)
        tokenizer_module, template = _tokenizer_and_template(lf, args, model_dir)
        encode = _encoder(lf, args, stage, stage_for_loader, tokenizer_module, template)
        yield _Counter(load=_loader(lf, args, stage_for_loader), encode=encode, split=_splitter(lf, args))


def _local_inputs(config: ConfigFacts) -> tuple[Path, str]:
    """(model folder, dataset folder) on this machine; BadInput without a dataset, or for a dataset file
    named outside the dataset folder (checked before anything reads the files the names point to)."""
    if not config.dataset:
        raise BadInput(msg("len_no_dataset", None, path=config.path))
    model_dir = local_model_dir(config)
    dataset_dir = _dataset_dir(config)
    if dataset_dir.upper() != "ONLINE":
        dataset_files_inside(Path(dataset_dir), [*config.dataset, *config.eval_dataset])
    return model_dir, dataset_dir


class _LfApi:
    """The LLaMA-Factory (and transformers) names the counter uses, imported together; BadInput naming the
    missing module when it is not installed. A plain class, not a dataclass: creating a record type costs
    every start of ``estimate``, which imports this module."""

    def __init__(self) -> None:
        try:
            from llamafactory.data.data_utils import split_dataset
            from llamafactory.data.loader import _get_dataset_processor, _get_merged_dataset
            from llamafactory.data.template import get_template_and_fix_tokenizer
            from llamafactory.hparams import DataArguments, ModelArguments
            from llamafactory.model import load_tokenizer
            from transformers import Seq2SeqTrainingArguments
        except ImportError as err:
            raise BadInput(msg("len_needs_llamafactory", None, detail=str(err).splitlines()[0])) from None
        self.split_dataset = split_dataset
        self.get_dataset_processor = _get_dataset_processor
        self.get_merged_dataset = _get_merged_dataset
        self.get_template_and_fix_tokenizer = get_template_and_fix_tokenizer
        self.data_arguments = DataArguments
        self.model_arguments = ModelArguments
        self.load_tokenizer = load_tokenizer
        self.training_arguments = Seq2SeqTrainingArguments


def _data_kwargs(config: ConfigFacts, lf: _LfApi, dataset_dir: str) -> dict[str, Any]:
    """The config's DataArguments, with the cutoff lifted and packing, streaming and caching off."""
    import dataclasses  # LLaMA-Factory's DataArguments is a stdlib dataclass

    data_fields = {f.name for f in dataclasses.fields(lf.data_arguments)}
    data_kwargs = {k: v for k, v in config.raw.items() if k in data_fields}
    data_kwargs.update(_FORCED_DATA_ARGS)
    data_kwargs["dataset_dir"] = dataset_dir
    data_kwargs["dataset"] = ",".join(config.dataset)
    data_kwargs["eval_dataset"] = ",".join(config.eval_dataset) if config.eval_dataset else None
    data_kwargs.pop("media_dir", None)
    return data_kwargs


# LLaMA-Factory's (data, model, training) arguments.
_LfArgs = tuple[Any, Any, Any]


def _lf_args(
    config: ConfigFacts, lf: _LfApi, data_kwargs: dict[str, Any], model_dir: Path, scratch: str
) -> _LfArgs:
    """LLaMA-Factory's data, model and training arguments (caches in ``scratch``); BadInput when they do
    not build."""
    try:
        data_args = lf.data_arguments(**data_kwargs)
        model_args = lf.model_arguments(
            model_name_or_path=str(model_dir),
            cache_dir=scratch,
            trust_remote_code=bool(config.raw.get("trust_remote_code", False)),
        )
        training_args = lf.training_arguments(
            output_dir=scratch, report_to="none", seed=int(config.raw.get("seed", 42))
        )
    except (TypeError, ValueError) as err:
        raise BadInput(msg("len_bad_args", None, detail=str(err).splitlines()[0])) from None
    return data_args, model_args, training_args


def _tokenizer_and_template(lf: _LfApi, args: _LfArgs, model_dir: Path) -> tuple[Any, Any]:
    """(tokenizer module, template) for the local model; BadInput when either cannot be set up."""
    data_args, model_args, _ = args
    try:
        tokenizer_module = lf.load_tokenizer(model_args)
    except (OSError, ValueError) as err:
        raise BadInput(
            msg("len_tokenizer_failed", None, model=str(model_dir), detail=str(err).splitlines()[0])
        ) from None
    try:
        template = lf.get_template_and_fix_tokenizer(tokenizer_module["tokenizer"], data_args)
    except (OSError, ValueError, KeyError) as err:
        raise BadInput(msg("len_dataset_failed", None, detail=str(err).splitlines()[0])) from None
    return tokenizer_module, template


def _encoder(
    lf: _LfApi, args: _LfArgs, stage: str, stage_for_loader: str, tokenizer_module: Any, template: Any
) -> Callable[[dict[str, list[Any]]], list[int]]:
    """Token count per sample of a batch: pretraining's text plus EOS, else the stage's dataset processor."""
    tokenizer = tokenizer_module["tokenizer"]
    data_args = args[0]
    if stage == "pt":
        eos = tokenizer.eos_token or ""

        def encode_text(batch: dict[str, list[Any]]) -> list[int]:
            texts = [messages[0]["content"] + eos for messages in batch["_prompt"]]
            return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]

        return encode_text
    processor = lf.get_dataset_processor(
        data_args, stage_for_loader, template, tokenizer, tokenizer_module.get("processor")
    )

    def encode(batch: dict[str, list[Any]]) -> list[int]:
        return _lengths_of(processor.preprocess_dataset(batch))

    return encode


def _loader(lf: _LfApi, args: _LfArgs, stage_for_loader: str) -> Callable[[list[str] | None, bool], Any]:
    """LLaMA-Factory's merged-dataset loader (one dataset, or one per name); BadInput when it fails."""
    data_args, model_args, training_args = args

    def load(names: list[str] | None, per_name: bool) -> Any:
        try:
            return lf.get_merged_dataset(
                names, model_args, data_args, training_args, stage_for_loader, return_dict=per_name
            )
        except (OSError, ValueError, KeyError) as err:
            raise BadInput(msg("len_dataset_failed", None, detail=str(err).splitlines()[0])) from None

    return load


def _splitter(lf: _LfApi, args: _LfArgs) -> Callable[[Any, Any], tuple[dict[str, Any], dict[str, Any]]]:
    """LLaMA-Factory's train/validation split (val_size, the config's seed); BadInput when it fails."""
    data_args, _, training_args = args

    def split(train: Any, evaluation: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            parts: tuple[dict[str, Any], dict[str, Any]] = lf.split_dataset(
                train, evaluation, data_args, seed=training_args.seed
            )
            return parts
        except (OSError, ValueError, KeyError) as err:
            raise BadInput(msg("len_dataset_failed", None, detail=str(err).splitlines()[0])) from None

    return split


def token_lengths(
    config: ConfigFacts,
    *,
    cutoff_len: int | None = None,
    progress: Progress | None = None,
) -> DataFacts:
    """Tokenize the configured train (and eval) datasets with the config's template as LLaMA-Factory does,
    and report max / p50 / p95 / p99 tokens and how many samples ``cutoff_len`` (default: the config's)
    would cut. ``progress(done, total)`` is called after every batch of samples.

    BadInput (one line) when llamafactory is not installed, the tokenizer is not on this machine, or the
    dataset cannot be read.
    """
    cutoff = int(cutoff_len or config.cutoff_len)
    with _lf_counter(config) as counter:
        train = counter.load(list(config.dataset), False)
        evaluation = counter.load(list(config.eval_dataset) or None, False)
        train_dict, eval_dict = counter.split(train, evaluation)
        splits = {"train": train_dict.get("train"), **eval_dict}
        total = sum(len(d) for d in splits.values() if d is not None)
        done = 0
        if progress is not None:
            progress(0, total)
        train_lengths: list[int] = []
        eval_lengths: list[int] | None = None
        for name, dataset in splits.items():
            if dataset is None:
                continue
            lengths, done = _measure(dataset, counter.encode, progress, done, total)
            if name == "train":
                train_lengths = lengths
            else:
                eval_lengths = (eval_lengths or []) + lengths
    return summarise(train_lengths, eval_lengths, cutoff, source="tokenized")


# Counts in a lengths file: samples and tokens, each a whole number (at most 2**40: more tokens than any
# dataset holds).
_LENGTH_MAX = 1 << 40
_LENGTH_COUNTS = ("samples", "max_tokens", "p50_tokens", "p95_tokens", "p99_tokens", "eval_samples",
                  "eval_max_tokens", "cutoff_len", "truncated")  # fmt: skip


def row_lengths(config: ConfigFacts, names: Sequence[str]) -> dict[str, list[int]]:
    """Full token length of every row of each named dataset, in the file's row order (as ``token_lengths``
    counts them, before any train/validation split): what a probe trial sorts by."""
    with _lf_counter(config) as counter:
        per_name = counter.load(list(names), True) or {}
        return {
            name: _measure(dataset, counter.encode, None, 0, None)[0] for name, dataset in per_name.items()
        }


def read_lengths_file(path: str | Path) -> DataFacts:
    """Lengths saved earlier with ``oomdoctor lengths --json > FILE``: measuring is slow, reading is not.

    BadInput naming the file (and the key) for anything else: not a regular file, over 1 MiB, not a JSON
    object, nested too deep, a count that is not a whole number in range, no positive ``max_tokens``."""
    from oomdoctor import inputs

    p = Path(path)
    shown = one_line(p)
    if not p.exists():
        raise BadInput(msg("file_missing", None, what=inputs.what_label("lengths file"), path=shown))
    try:
        raw = inputs.read_json(p, what="lengths file", max_bytes=inputs.MAX_BYTES["lengths"])
        if not isinstance(raw, dict) or raw.get("max_tokens") is None:
            raise BadInput("no positive max_tokens")
        values: dict[str, Any] = {
            "source": str(raw["source"])[:40] if isinstance(raw.get("source"), str) else "given"
        }
        for key in _LENGTH_COUNTS:
            low = 1 if key == "max_tokens" else 0
            values[key] = inputs.optional_int(raw, key, path=shown, low=low, high=_LENGTH_MAX)
    except BadInput as err:
        raise BadInput(msg("lengths_file_bad", None, path=shown, detail=in_lang(err, "en"))) from None
    return DataFacts(**values)


def dataset_files_inside(dataset_dir: Path, names: Sequence[str]) -> dict[str, Path]:
    """The local file (or folder) each dataset name points to through ``dataset_dir/dataset_info.json``.

    Names without a local ``file_name`` (hub datasets, missing entries) are left out; a ``file_name`` that
    leads outside ``dataset_dir`` (``../../etc``, an absolute path, a link out) is BadInput: neither the
    lengths nor the trial's fingerprint may read what the dataset folder does not hold."""
    from oomdoctor import inputs

    info_path = dataset_dir / "dataset_info.json"
    if not os.path.lexists(info_path):  # a dangling link is there, and refused below
        return {}
    info = inputs.read_json_object(info_path, what="dataset_info.json")
    base = dataset_dir.resolve()
    found: dict[str, Path] = {}
    for name in names:
        entry = info.get(name)
        if not isinstance(entry, dict) or not isinstance(entry.get("file_name"), str):
            continue
        file_name = entry["file_name"]
        target = (dataset_dir / file_name).resolve()
        if not target.is_relative_to(base):
            raise BadInput(msg("in_escapes", None, path=one_line(info_path), key=f"{one_line(name)}.file_name",
                               value=one_line(file_name), base=one_line(base)))  # fmt: skip
        found[name] = target
    return found


def known_lengths(
    lengths_file: str | Path | None = None,
    longest_tokens: int | None = None,
    eval_longest_tokens: int | None = None,
) -> DataFacts | None:
    """The real lengths the user gave us: a saved lengths file, overridden by numbers typed in; None if neither."""
    data = read_lengths_file(lengths_file) if lengths_file is not None else None
    if longest_tokens is None and eval_longest_tokens is None:
        return data
    base = data or DataFacts(source="given")
    return records.replace(
        base,
        max_tokens=longest_tokens or base.max_tokens,
        eval_max_tokens=eval_longest_tokens or base.eval_max_tokens,
    )
