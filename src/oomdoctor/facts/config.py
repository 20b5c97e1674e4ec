"""Read a LLaMA-Factory training config into ``ConfigFacts``, with LLaMA-Factory 0.9.5's defaults applied.

This is the one place that knows those defaults; the values themselves live in ``lf_defaults.yaml`` beside
this file (each cited to the dataclass that defines it). Configs written by hand, by the course, or by the
WebUI (``training_args.yaml`` in the output folder, where numbers and booleans are sometimes strings) are
all accepted. Keys LLaMA-Factory does not know are kept in ``unknown_keys``, never fatal: the user needs
the diagnosis even when the config has a typo, and the typo is itself worth reporting.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomdoctor import inputs, records, usercache
from oomdoctor.datafiles import load_data_mapping
from oomdoctor.errors import BadInput, one_line
from oomdoctor.facts.types import ConfigFacts
from oomdoctor.i18n import both, msg

if TYPE_CHECKING:
    import yaml

    from oomdoctor.text import Text

_KNOWLEDGE_FILE = Path(__file__).with_name("lf_defaults.yaml")
_CONFIG_KIND = "config-v1"
_SNIFF_BYTES = 8192


@functools.lru_cache(maxsize=1)
def lf_knowledge() -> dict[str, Any]:
    """The parsed ``lf_defaults.yaml``: defaults, known keys, DeepSpeed naming, path keys."""
    return load_data_mapping(_KNOWLEDGE_FILE)


def lf_defaults() -> dict[str, Any]:
    return dict(lf_knowledge()["defaults"])


def known_keys() -> frozenset[str]:
    data = lf_knowledge()
    return frozenset(data["known_keys"]) | frozenset(data["defaults"])


# --------------------------------------------------------------------------------------------- loading


def read_config_text(path: str | os.PathLike[str], *, what: str = "config") -> str:
    """The file's text, or BadInput for a missing path, anything but a regular file (a folder, a FIFO, a
    device), a file too big to be a config (checked from its size before reading), a binary or non-UTF-8 file.

    LLaMA-Factory (OmegaConf) reads configs as UTF-8, so that is the only encoding accepted here too.
    """
    p = Path(path)
    data = inputs.read_bytes(p, what=what, max_bytes=inputs.MAX_BYTES["config"])
    shown = one_line(p)
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise BadInput(msg("config_binary", None, path=shown))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput(msg("config_not_utf8", None, path=shown)) from None


def yaml_error_line(err: yaml.YAMLError) -> str:
    """PyYAML errors span several lines; the user gets one: "line 3, column 5: <problem>"."""
    return inputs.yaml_error_line(err)


def load_yaml_mapping(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The config as a plain dict (PyYAML's safe constructors, aliases and depth bounded); BadInput when it
    is not a YAML mapping."""
    p = Path(path)
    shown = one_line(p)
    text = read_config_text(p)
    raw = _parsed(text, lambda: inputs.load_yaml(text, path=shown))
    if raw is None:
        raise BadInput(msg("config_empty", None, path=shown))
    if not isinstance(raw, dict):
        raise BadInput(msg("yaml_not_mapping", None, path=shown))
    return {str(k): v for k, v in raw.items()}


def _parsed(text: str, parse: Callable[[], Any]) -> Any:
    """``parse()``, read back from the user cache when this same text was parsed before: a start then needs
    no YAML parser (importing PyYAML alone costs more than the rest of reading a config). The key holds the
    text and the input layer's code, whose bounds a kept parse has passed; only a parse that succeeded, and
    comes back from the cache unchanged, is kept."""
    try:
        reader = Path(inputs.__file__).read_bytes()
    except OSError:
        return parse()
    return usercache.kept(_CONFIG_KIND, [("config", text.encode("utf-8")), ("inputs", reader)], parse)


def read_config(path: str | os.PathLike[str], *, world_size: int | None = None) -> ConfigFacts:
    """Read a config file; relative DeepSpeed paths are looked up from the config's folder, then the cwd."""
    p = Path(path).expanduser()
    raw = load_yaml_mapping(p)
    return config_from_mapping(raw, path=str(p.resolve()), base_dir=p.resolve().parent, world_size=world_size)


# ------------------------------------------------------------------------------------------- coercion


class _Coerce:
    """Turns YAML values (or the strings the WebUI writes) into the types LLaMA-Factory expects."""

    def __init__(self, raw: Mapping[str, Any], path: str) -> None:
        self.raw = raw
        self.path = path
        self.defaults = lf_defaults()
        bools = lf_knowledge()["bool_strings"]
        self.true_words = {str(w).lower() for w in bools["true"]}
        self.false_words = {str(w).lower() for w in bools["false"]}

    def given(self, key: str) -> bool:
        """True when the config sets the key to something (a bare ``key:`` means unset)."""
        return self.raw.get(key) is not None

    def value(self, key: str) -> Any:
        return self.raw[key] if self.given(key) else self.defaults.get(key)

    def _bad(self, key: str, expected: Text) -> BadInput:
        return BadInput(
            msg(
                "config_bad_value",
                None,
                path=one_line(self.path),
                field=one_line(key),
                value=inputs.Shown(self.raw.get(key)),
                expected=expected,
            )
        )

    def integer(self, key: str, *, high: int = inputs.MAX_INT) -> int | None:
        """A whole number within ``[-high, high]`` (an int, an integral float, or the WebUI's "4")."""
        v = self.value(key)
        if v is None:
            return None
        try:
            return inputs.as_int(v, path=self.path, key=key, low=-high, high=high)
        except BadInput:
            raise self._bad(key, both("expect_integer")) from None

    def number(self, key: str) -> float | None:
        """A finite number (an int, a float, or a string of one)."""
        v = self.value(key)
        if v is None:
            return None
        try:
            return inputs.as_number(v, path=self.path, key=key)
        except BadInput:
            raise self._bad(key, both("expect_number")) from None

    def steps(self, key: str) -> int | float | None:
        """logging/eval/save steps: an integer, or a float in [0, 1) meaning a ratio of the total steps."""
        v = self.number(key)
        if v is None:
            return None
        return int(v) if v.is_integer() else v

    def flag(self, key: str) -> bool:
        v = self.value(key)
        if v is None:
            return False
        if isinstance(v, bool):
            return v
        if isinstance(v, int) and v in (0, 1):
            return bool(v)
        if isinstance(v, str):
            word = v.strip().lower()
            if word in self.true_words:
                return True
            if word in self.false_words:
                return False
        raise self._bad(key, both("expect_bool"))

    def text(self, key: str) -> str | None:
        v = self.value(key)
        if v is None:
            return None
        if isinstance(v, list | tuple):
            return ",".join(str(item).strip() for item in v)
        if isinstance(v, dict):
            raise self._bad(key, both("expect_string"))
        return str(v).strip()

    def names(self, key: str) -> list[str]:
        """Comma-separated names (dataset, eval_dataset), as LLaMA-Factory's split_arg reads them."""
        v = self.value(key)
        if v is None:
            return []
        items = v if isinstance(v, list | tuple) else str(v).split(",")
        return [str(item).strip() for item in items if str(item).strip()]


# ------------------------------------------------------------------------------------------ DeepSpeed


def _deepspeed_candidates(value: str, base_dir: Path | None) -> list[Path]:
    """Where a relative DeepSpeed path may be: the config's folder, the cwd, then up to three folders above
    the config (LLaMA-Factory's examples name ``examples/deepspeed/...`` relative to the repository root)."""
    p = Path(value).expanduser()
    if p.is_absolute():
        return [p]
    out: list[Path] = []
    if base_dir is not None:
        out.append(base_dir / p)
    out.append(Path.cwd() / p)
    if base_dir is not None:
        out.extend(parent / p for parent in list(base_dir.parents)[:3])
    return out


def _offloaded(section: Any) -> bool:
    if not isinstance(section, dict):
        return False
    devices = {str(d).lower() for d in lf_knowledge()["deepspeed_offload_devices"]}
    return str(section.get("device", "none")).lower() in devices


def _from_deepspeed_json(ds: Mapping[str, Any]) -> tuple[int | None, bool, bool]:
    zero = ds.get("zero_optimization")
    if not isinstance(zero, dict):
        return None, False, False
    stage = zero.get("stage")
    try:
        zero_stage = (
            inputs.as_int(stage, path="DeepSpeed config", key="zero_optimization.stage", high=3)
            if stage is not None
            else None
        )
    except BadInput:
        zero_stage = None
    offload_optimizer = _offloaded(zero.get("offload_optimizer")) or bool(zero.get("cpu_offload"))
    offload_param = _offloaded(zero.get("offload_param"))
    return zero_stage, offload_optimizer, offload_param


def deepspeed_from_name(name: str) -> tuple[int | None, bool, bool]:
    """Stage and offloads from a LLaMA-Factory template name such as ``ds_z3_offload_config.json``."""
    knowledge = lf_knowledge()
    match = re.search(knowledge["deepspeed_name_pattern"], Path(name).name)
    if match is None:
        return None, False, False
    stage = int(match.group("stage"))
    if not match.group("offload"):
        return stage, False, False
    by_stage = knowledge["deepspeed_offload_by_stage"].get(stage, {})
    return stage, bool(by_stage.get("optimizer")), bool(by_stage.get("param"))


def read_deepspeed(value: Any, base_dir: Path | None, *, config_path: str) -> dict[str, Any]:
    """What a ``deepspeed:`` value means: the JSON when it can be found (or is inline), else the name.

    Returns ``{"deepspeed", "deepspeed_path", "deepspeed_found", "zero_stage", "offload_optimizer",
    "offload_param"}``. A JSON that exists but does not parse is bad input: training would stop on it too.
    """
    if isinstance(value, dict):
        stage, opt, par = _from_deepspeed_json(value)
        return _ds_result("<inline>", None, True, stage, opt, par)
    text = str(value).strip()
    if text.startswith("{"):
        inline = inputs.load_json(text, path=f"{one_line(config_path)}: deepspeed")
        if not isinstance(inline, dict):
            raise BadInput(
                msg("deepspeed_malformed", None, path=one_line(config_path), detail="not a JSON object")
            )
        stage, opt, par = _from_deepspeed_json(inline)
        return _ds_result("<inline>", None, True, stage, opt, par)
    if not _could_be_a_path(text):
        raise BadInput(
            msg(
                "deepspeed_malformed",
                None,
                path=one_line(config_path),
                detail="deepspeed is neither a JSON object nor a file name",
            )
        )
    for candidate in _deepspeed_candidates(text, base_dir):
        if _present(candidate):  # a FIFO, a folder or a dangling link there is refused, not skipped
            body = read_config_text(candidate, what="DeepSpeed config")
            ds = inputs.load_json(body, path=f"DeepSpeed config {one_line(candidate)}")
            if not isinstance(ds, dict):
                raise BadInput(
                    msg("deepspeed_malformed", None, path=one_line(candidate), detail="not a JSON object")
                )
            stage, opt, par = _from_deepspeed_json(ds)
            return _ds_result(text, str(candidate.resolve()), True, stage, opt, par)
    stage, opt, par = deepspeed_from_name(text)
    return _ds_result(text, None, False, stage, opt, par)


def _could_be_a_path(text: str) -> bool:
    """A value a file system could hold as a path: no NUL, at most 4,096 bytes, each part at most 255."""
    raw = os.fsencode(text)
    return b"\x00" not in raw and len(raw) <= 4096 and all(len(part) <= 255 for part in raw.split(b"/"))


def _present(path: Path) -> bool:
    """Something is at ``path`` (a link counts, even dangling); a name too long to exist is not there."""
    try:
        return os.path.lexists(path) and not path.is_dir()
    except (OSError, ValueError):
        return False


def _ds_result(
    written: str, path: str | None, found: bool, stage: int | None, opt: bool, par: bool
) -> dict[str, Any]:
    return {
        "deepspeed": written,
        "deepspeed_path": path,
        "deepspeed_found": found,
        "zero_stage": stage,
        "offload_optimizer": opt,
        "offload_param": par,
    }


# ------------------------------------------------------------------------------------------ the facts


def is_llamaboard_file(raw: Mapping[str, Any]) -> bool:
    """LLaMA Board's saved-arguments file (``top.model_name``, ``train.batch_size``...), not a config."""
    prefixes = tuple(lf_knowledge()["llamaboard_key_prefixes"])
    keys = [str(k) for k in raw]
    return bool(keys) and sum(k.startswith(prefixes) for k in keys) * 2 > len(keys)


def config_from_mapping(
    raw: Mapping[str, Any],
    *,
    path: str = "<inline>",
    base_dir: Path | None = None,
    world_size: int | None = None,
) -> ConfigFacts:
    """Apply LLaMA-Factory's defaults and derive what the rules need (effective batch, precision, ...).

    The settings are read in a fixed order (the first bad value met is the one reported): the batches, the
    precision, checkpointing, LoRA, packing, the eval schedule, the steps, DeepSpeed, then the record's own.
    The parts are plain tuples, not record types: this module is on every start's path.
    """
    raw = _plain_mapping(raw, path)
    c = _Coerce(_with_renamed_keys(raw), path)
    stage = c.text("stage") or "sft"
    return _config_facts(
        c,
        raw,
        stage=stage,
        batches=_batches(c, world_size),
        precision=_precision(c),
        checkpointing=_checkpointing(c),
        lora=_lora(c),
        packing=_packing(c, stage),
        schedule=_eval_schedule(c),
        max_steps=c.integer("max_steps"),
        ds=_deepspeed(c, raw, base_dir),
        quantization_bit=c.integer("quantization_bit"),
    )


def _plain_mapping(raw: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The config with text keys; BadInput for anything but a mapping, or for a LLaMA Board file."""
    if not isinstance(raw, Mapping):
        raise BadInput(msg("yaml_not_mapping", None, path=path))
    plain = {str(k): v for k, v in raw.items()}
    if is_llamaboard_file(plain):
        raise BadInput(msg("config_is_llamaboard", None, path=path))
    return plain


def _with_renamed_keys(raw: dict[str, Any]) -> dict[str, Any]:
    """An old config's renamed key still says what its run did (it stays in unknown_keys: 0.9.5 rejects it)."""
    renamed = {
        new: raw[old]
        for old, new in lf_knowledge()["renamed_keys"].items()
        if raw.get(new) is None and old in raw
    }
    return {**raw, **renamed}


def _batches(c: _Coerce, world_size: int | None) -> tuple[int, int, int, int]:
    """(train micro-batch, eval micro-batch, accumulation steps, GPUs)."""
    train_batch = _positive(c, "per_device_train_batch_size")
    eval_batch = _positive(c, "per_device_eval_batch_size")
    accumulation = _positive(c, "gradient_accumulation_steps")
    _check_samples_per_update(c, train_batch, accumulation)
    gpus = world_size if world_size and world_size > 0 else 1
    return train_batch, eval_batch, accumulation, gpus


def _precision(c: _Coerce) -> tuple[bool, bool, bool, str]:
    """(fp16, bf16, pure_bf16 as written, the precision in effect)."""
    fp16, bf16, pure_bf16 = c.flag("fp16"), c.flag("bf16"), c.flag("pure_bf16")
    if pure_bf16:
        precision = "pure_bf16"
    elif bf16:
        precision = "bf16"  # LLaMA-Factory picks bfloat16 first when both are set (parser.py compute_dtype)
    elif fp16:
        precision = "fp16"
    else:
        precision = "fp32"
    return fp16, bf16, pure_bf16, precision


def _checkpointing(c: _Coerce) -> tuple[bool, bool]:
    """(on, on only by LLaMA-Factory's default). LLaMA-Factory enables checkpointing in its model loader
    unless told not to; the Trainer's own gradient_checkpointing switch turns it on regardless."""
    disabled = c.flag("disable_gradient_checkpointing")
    trainer_gc = c.flag("gradient_checkpointing")
    checkpointing = trainer_gc or not disabled
    by_default = checkpointing and not trainer_gc and not c.given("disable_gradient_checkpointing")
    return checkpointing, by_default


def _lora(c: _Coerce) -> tuple[int, int]:
    """(rank, alpha): alpha unset or 0 is twice the rank."""
    lora_rank = _positive(c, "lora_rank")
    return lora_rank, c.integer("lora_alpha") or lora_rank * 2


def _packing(c: _Coerce, stage: str) -> bool:
    """Packing as written, else on for pretraining only; neat_packing packs too."""
    packing = c.flag("packing") if c.value("packing") is not None else stage == "pt"
    if c.flag("neat_packing"):
        packing = True
    return packing


def _eval_schedule(c: _Coerce) -> tuple[list[str], float, str, bool, int | float | None, int | float | None]:
    """(eval datasets, val_size, eval strategy, whether it evaluates, logging steps, eval steps)."""
    eval_dataset = c.names("eval_dataset")
    val_size = c.number("val_size") or 0.0
    eval_strategy = (c.text("eval_strategy") or "no").lower()
    has_eval_data = bool(eval_dataset) or val_size > float(lf_knowledge()["eval_val_size_min"])
    # do_eval without a strategy still evaluates once after training (LLaMA-Factory's workflows call
    # trainer.evaluate() when do_eval is set).
    do_eval = has_eval_data and (eval_strategy != "no" or c.flag("do_eval"))
    logging_steps = c.steps("logging_steps")
    eval_steps: int | float | None = None
    if eval_strategy == "steps":
        eval_steps = c.steps("eval_steps") or logging_steps  # transformers: unset or 0 -> logging_steps
    return eval_dataset, val_size, eval_strategy, do_eval, logging_steps, eval_steps


def _deepspeed(c: _Coerce, raw: Mapping[str, Any], base_dir: Path | None) -> dict[str, Any]:
    """``read_deepspeed``'s answer for the config's ``deepspeed:`` as written, or all unset without one."""
    if c.given("deepspeed"):
        return read_deepspeed(raw["deepspeed"], base_dir, config_path=c.path)
    ds = _ds_result("", None, False, None, False, False)
    ds["deepspeed"] = None
    return ds


def _config_facts(
    c: _Coerce,
    raw: dict[str, Any],
    *,
    stage: str,
    batches: tuple[int, int, int, int],
    precision: tuple[bool, bool, bool, str],
    checkpointing: tuple[bool, bool],
    lora: tuple[int, int],
    packing: bool,
    schedule: tuple[list[str], float, str, bool, int | float | None, int | float | None],
    max_steps: int | None,
    ds: dict[str, Any],
    quantization_bit: int | None,
) -> ConfigFacts:
    """The record: the parts ``config_from_mapping`` worked out, and the settings read as they are (in the
    record's field order)."""
    train_batch, eval_batch, accumulation, gpus = batches
    fp16, bf16, pure_bf16, precision_name = precision
    eval_dataset, val_size, eval_strategy, do_eval, logging_steps, eval_steps = schedule
    known = known_keys()
    return ConfigFacts(
        path=c.path,
        raw=raw,
        stage=stage,
        finetuning_type=c.text("finetuning_type") or "lora",
        model_name_or_path=c.text("model_name_or_path"),
        template=c.text("template"),
        dataset=c.names("dataset"),
        eval_dataset=eval_dataset,
        dataset_dir=c.text("dataset_dir") or "data",
        val_size=val_size,
        max_samples=c.integer("max_samples"),
        per_device_train_batch_size=train_batch,
        per_device_eval_batch_size=eval_batch,
        per_device_eval_batch_size_set=c.given("per_device_eval_batch_size"),
        gradient_accumulation_steps=accumulation,
        world_size=gpus,
        cutoff_len=_positive(c, "cutoff_len"),
        packing=packing,
        fp16=fp16,
        bf16=bf16,
        pure_bf16=pure_bf16,
        precision=precision_name,
        gradient_checkpointing=checkpointing[0],
        gradient_checkpointing_by_default=checkpointing[1],
        quantization_bit=quantization_bit,
        quantization_method=c.text("quantization_method") or "bnb",
        quantization_type=c.text("quantization_type") or "nf4",
        double_quantization=c.flag("double_quantization"),
        lora_rank=lora[0],
        lora_alpha=lora[1],
        lora_target=c.text("lora_target") or "all",
        deepspeed=ds["deepspeed"],
        deepspeed_found=ds["deepspeed_found"],
        deepspeed_path=ds["deepspeed_path"],
        zero_stage=ds["zero_stage"],
        offload_optimizer=ds["offload_optimizer"],
        offload_param=ds["offload_param"],
        do_eval=do_eval,
        eval_strategy=eval_strategy,
        eval_steps=eval_steps,  # type: ignore[arg-type]  # a float below 1 is a ratio of total steps
        eval_accumulation_steps=c.integer("eval_accumulation_steps"),
        save_steps=c.steps("save_steps"),  # type: ignore[arg-type]
        logging_steps=logging_steps,  # type: ignore[arg-type]
        max_steps=max_steps if max_steps is not None and max_steps > 0 else None,
        num_train_epochs=c.number("num_train_epochs") or 0.0,
        optim=c.text("optim") or str(lf_defaults()["optim"]),
        flash_attn=(c.text("flash_attn") or "auto").lower(),
        enable_liger_kernel=c.flag("enable_liger_kernel"),
        use_unsloth_gc=c.flag("use_unsloth_gc"),
        output_dir=c.text("output_dir"),
        do_train=c.flag("do_train"),
        evaluation_only=_evaluation_only(c, do_eval),
        freeze_vision_tower=c.flag("freeze_vision_tower") if c.given("freeze_vision_tower") else True,
        written_keys=frozenset(str(k) for k in raw),
        unknown_keys=[k for k in raw if k not in known],
    )


def _evaluation_only(c: _Coerce, do_eval: bool) -> bool:
    """The config runs no training step (``ConfigFacts.evaluation_only``): `llamafactory-cli eval` arguments,
    do_predict without do_train, or generation-based prediction (``predict_with_generate``, which
    LLaMA-Factory's SFT only runs in evaluation and prediction) or do_eval with training written off."""
    if c.given("task") or (c.flag("do_predict") and not c.flag("do_train")):
        return True
    if c.flag("do_train"):
        return False
    if c.raw.get("predict_with_generate") is True:
        return True
    evaluates = do_eval or c.raw.get("do_eval") is True or c.raw.get("do_predict") is True
    return c.raw.get("do_train") is False and evaluates


# The largest value each count can sensibly hold: a micro-batch of a million samples, a million
# accumulation steps, 16M tokens, a LoRA rank of 65,536. Past these a value is a typo or hostile, and
# arithmetic on it (the estimate's search halves the batch) would only waste time.
_POSITIVE_MAX = {
    "per_device_train_batch_size": 1 << 20,
    "per_device_eval_batch_size": 1 << 20,
    "gradient_accumulation_steps": 1 << 20,
    "cutoff_len": 1 << 24,
    "lora_rank": 1 << 16,
}


# Samples one device takes per optimizer update (micro-batch x accumulation): pretraining's largest batches
# are a few thousand samples. The fit search walks the divisors of this number.
_MAX_SAMPLES_PER_UPDATE = 1 << 20


def _check_samples_per_update(c: _Coerce, train_batch: int, accumulation: int) -> None:
    if train_batch * accumulation > _MAX_SAMPLES_PER_UPDATE:
        raise c._bad(
            "gradient_accumulation_steps",
            both("expect_samples_per_update", most=f"{_MAX_SAMPLES_PER_UPDATE:,}", batch=f"{train_batch:,}"),
        )


def _positive(c: _Coerce, key: str) -> int:
    high = _POSITIVE_MAX.get(key, inputs.MAX_INT)
    value = c.integer(key, high=high)
    if value is None or not 1 <= value <= high:
        raise c._bad(key, both("expect_whole_range", high=f"{high:,}"))
    return value


def setting(config: ConfigFacts, key: str) -> Any:
    """The value in effect for a YAML key: the typed field, else the key as written, else LLaMA-Factory's
    default (None when the table has none). What code outside this module reads instead of ``raw``."""
    if key in _CONFIG_FIELDS:
        return getattr(config, key)
    if key in config.raw:
        return config.raw[key]
    return lf_defaults().get(key)


_CONFIG_FIELDS = frozenset(f.name for f in records.fields(ConfigFacts))


def written(config: ConfigFacts, key: str) -> bool:
    """The config itself names a value for ``key`` (a default does not count)."""
    return config.raw.get(key) not in (None, "")


def fsdp_shard_stage(config: ConfigFacts) -> int:
    """The ZeRO stage that shards the same state as the config's FSDP strategy (``fsdp_zero_stage``:
    full_shard 3, shard_grad_op 2), what the estimate divides by the world size; 0 without FSDP, with
    DeepSpeed (its own stage counts) or with a strategy the table does not name."""
    if config.deepspeed or config.zero_stage is not None:
        return 0
    stage = _fsdp_stage(setting(config, "fsdp"))
    if stage is None:
        fsdp_config = setting(config, "fsdp_config")
        if isinstance(fsdp_config, dict):
            strategy = fsdp_config.get("fsdp_sharding_strategy", fsdp_config.get("sharding_strategy"))
            stage = _fsdp_stage(strategy)
    return stage or 0


def _fsdp_stage(value: Any) -> int | None:
    """The ZeRO stage of the first FSDP strategy word in ``value`` ("full_shard auto_wrap", ["full_shard"],
    FULL_SHARD), None when it names none."""
    words = value if isinstance(value, list) else str(value or "").replace(",", " ").split()
    table = lf_knowledge()["fsdp_zero_stage"]
    return next((int(table[w]) for w in (str(x).strip().lower() for x in words) if w in table), None)


def exports(config: ConfigFacts) -> bool:
    """The config is an export's (``llamafactory-cli export``: it writes ``export_dir``, which LLaMA-Factory's
    export_model requires and no training reads) and trains nothing (no do_train, no training-only key)."""
    return written(config, "export_dir") and not config.do_train and not writes_training_keys(config)


def writes_training_keys(config: ConfigFacts) -> bool:
    """The config writes a key only a training run uses (``training_only_keys``: the learning rate, the
    schedule, the LoRA rank...): it trains, whatever else it says."""
    return any(written(config, key) for key in lf_knowledge()["training_only_keys"])
