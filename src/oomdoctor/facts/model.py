"""The model's shape: from its config.json when it is on this machine, else from a built-in table.

The estimator needs hidden size, layers, heads, vocabulary and the parameter count. Users name models the
way they trained them: a hub id (``Qwen/Qwen3-0.6B``), a local folder, a ModelScope cache folder
(``Qwen3-0___6B``) or a WebUI label (``Qwen3-0.6B-Thinking``). We look for a config.json in the places
LLaMA-Factory would load from, and fall back to ``model_table.yaml``. Nothing here imports torch or
transformers: config.json is plain JSON.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from oomdoctor.datafiles import load_data_mapping
from oomdoctor.errors import BadInput
from oomdoctor.facts.types import ConfigFacts, ModelFacts

_TABLE_PATH = Path(__file__).with_name("model_table.yaml")


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return load_data_mapping(_TABLE_PATH)


def family_traits(model_type: str | None) -> dict[str, Any]:
    """Architecture traits for a config.json ``model_type`` (defaults for unknown types)."""
    families = _table()["families"]
    traits = dict(families["default"])
    traits.update(families.get(model_type or "", {}))
    return traits


# ---------------------------------------------------------------------------------------------- names


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _name_variants(name: str) -> Iterator[str]:
    """The name, then the name with shape-neutral suffixes and prefixes dropped one at a time."""
    base = name.strip().rstrip("/\\")
    base = re.split(r"[/\\]", base)[-1].lower().replace("___", ".").replace("_", "-")
    table = _table()
    suffixes = sorted((str(s) for s in table["strip_suffixes"]), key=len, reverse=True)
    prefixes = [str(p) for p in table["strip_prefixes"]]
    seen: set[str] = set()
    current = base
    while current and current not in seen:
        seen.add(current)
        yield current
        for prefix in prefixes:
            if current.startswith(prefix):
                yield current[len(prefix) :]
        for suffix in suffixes:
            if current.endswith("-" + suffix):
                current = current[: -len(suffix) - 1]
                break
        else:
            break
    for prefix in prefixes:
        if current.startswith(prefix):
            yield current[len(prefix) :]


@lru_cache(maxsize=1)
def _name_index() -> dict[str, dict[str, Any]]:
    index: dict[str, dict[str, Any]] = {}
    for row in _table()["models"]:
        for alias in [row["key"], *row.get("names", [])]:
            index.setdefault(_squash(str(alias)), row)
    return index


def table_keys() -> list[str]:
    return [row["key"] for row in _table()["models"]]


def model_from_name(name: str | None) -> ModelFacts | None:
    """The built-in shape for a model name (``"Qwen/Qwen3-0.6B"``, ``"qwen3-0.6b"``, ``".../Qwen3-0.6B"``,
    ``"Qwen3-0.6B-Thinking"``), or None when the table does not know it."""
    if not name:
        return None
    index = _name_index()
    for variant in _name_variants(name):
        row = index.get(_squash(variant))
        if row is not None:
            return _facts_from_row(row, name)
    return None


def _facts_from_row(row: Mapping[str, Any], name: str) -> ModelFacts:
    shape = {
        "model_type": row["model_type"],
        "hidden_size": row["hidden"],
        "num_hidden_layers": row["layers"],
        "num_attention_heads": row["heads"],
        "num_key_value_heads": row.get("kv_heads", row["heads"]),
        "intermediate_size": row["intermediate"],
        "vocab_size": row["vocab"],
        "tie_word_embeddings": row["tie"],
    }
    if "head_dim" in row:
        shape["head_dim"] = row["head_dim"]
    if "num_experts" in row:
        shape["num_experts"] = row["num_experts"]
        shape["num_experts_per_tok"] = row["experts_per_token"]
        shape["moe_intermediate_size"] = row["moe_intermediate"]
    facts = model_from_config_dict(shape, source=f"table:{row['key']}", name=name)
    facts.torch_dtype = "bfloat16"
    return facts


# ------------------------------------------------------------------------------------ config.json


def _first(cfg: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = cfg.get(key)
        if value is not None:
            return value
    return None


def model_from_config_dict(
    raw: Mapping[str, Any], *, source: str = "config.json", name: str | None = None
) -> ModelFacts:
    """ModelFacts from a parsed config.json (nested ``text_config`` of VL models is read too)."""
    cfg = _checked_shape(_language_config(raw), source)
    traits = family_traits(cfg.get("model_type"))
    facts = _facts_from_shape(cfg, traits, source=source, name=name)
    if all(
        v is not None
        for v in (facts.hidden_size, facts.num_layers, facts.num_attention_heads, facts.vocab_size)
    ):
        total, active, embedding = count_params(
            facts, traits, first_dense_layers=_int(cfg.get("first_k_dense_replace")) or 0
        )
        facts.params, facts.params_active, facts.embedding_params = total, active, embedding
    return facts


def _language_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The config, with a VL model's nested language config (``text_config``, ``llm_config``,
    ``language_config``) laid over the outer keys; the outer model_type and tie flag fill what it lacks."""
    for nested in ("text_config", "llm_config", "language_config"):
        sub = raw.get(nested)
        if isinstance(sub, Mapping) and _first(sub, "hidden_size", "n_embd", "d_model") is not None:
            cfg = {**{k: v for k, v in raw.items() if k != nested}, **sub}
            cfg.setdefault("model_type", sub.get("model_type") or raw.get("model_type"))
            if "tie_word_embeddings" not in sub and "tie_word_embeddings" in raw:
                cfg["tie_word_embeddings"] = raw["tie_word_embeddings"]
            return cfg
    return dict(raw)


def _facts_from_shape(
    cfg: Mapping[str, Any], traits: Mapping[str, Any], *, source: str, name: str | None
) -> ModelFacts:
    """The shape under whichever of the families' key names the config uses, with the family's traits."""
    hidden, heads, kv_heads, head_dim = _attention_dims(cfg)
    intermediate = _first(cfg, "intermediate_size", "ffn_hidden_size", "n_inner")
    if intermediate is None and hidden:
        intermediate = 4 * int(hidden)
    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = bool(traits.get("tie_default", False))
    num_experts, shared_i = _expert_dims(cfg)
    architectures = cfg.get("architectures") or []
    return ModelFacts(
        name=name or cfg.get("_name_or_path") or None,
        source=source,
        architecture=architectures[0] if architectures else None,
        hidden_size=_int(hidden),
        num_layers=_int(_first(cfg, "num_hidden_layers", "n_layer", "num_layers")),
        num_attention_heads=_int(heads),
        num_key_value_heads=_int(kv_heads if kv_heads is not None else heads),
        head_dim=_int(head_dim),
        intermediate_size=_int(intermediate),
        vocab_size=_int(_first(cfg, "vocab_size", "padded_vocab_size")),
        tie_word_embeddings=bool(tie),
        torch_dtype=_text_or_none(_first(cfg, "torch_dtype", "dtype")),
        model_type=cfg.get("model_type"),
        gated_mlp=traits.get("mlp", "gated") == "gated",
        norms_per_layer=int(traits.get("norms_per_layer", 2)),
        qk_norm=bool(traits.get("qk_norm", False)),
        attn_default=traits.get("attn_default"),
        num_experts=_int(num_experts) if num_experts else None,
        num_experts_per_tok=_int(_first(cfg, "num_experts_per_tok", "moe_topk", "top_k"))
        if num_experts
        else None,
        moe_intermediate_size=_int(_first(cfg, "moe_intermediate_size")) if num_experts else None,
        shared_expert_intermediate_size=_int(shared_i) if num_experts and shared_i else None,
    )


def _attention_dims(cfg: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
    """(hidden size, heads, KV heads, head dim) as written; KV heads equal the heads when multi-query
    attention is written off, the head dim is hidden / heads when not given."""
    hidden = _first(cfg, "hidden_size", "n_embd", "d_model")
    heads = _first(cfg, "num_attention_heads", "n_head", "num_heads")
    kv_heads = _first(cfg, "num_key_value_heads", "multi_query_group_num", "n_head_kv", "num_kv_heads")
    if kv_heads is None and cfg.get("multi_query_attention") is False:
        kv_heads = heads
    head_dim = _first(cfg, "head_dim", "kv_channels")
    if head_dim is None and hidden and heads:
        head_dim = int(hidden) // int(heads)
    return hidden, heads, kv_heads, head_dim


def _expert_dims(cfg: Mapping[str, Any]) -> tuple[Any, Any]:
    """(routed experts, shared expert width) of a MoE; DeepSeek writes the shared width as a number of
    shared experts of the routed width."""
    num_experts = _first(cfg, "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
    shared_i = _first(cfg, "shared_expert_intermediate_size")
    if shared_i is None and cfg.get("n_shared_experts") and cfg.get("moe_intermediate_size"):
        shared_i = int(cfg["n_shared_experts"]) * int(cfg["moe_intermediate_size"])
    return num_experts, shared_i


# Every number of the shape that the estimate multiplies: a whole number, at most 2**31 (a vocabulary of
# two billion, a hidden size no model has). Heads divide, so they must be at least 1.
_SHAPE_KEYS = (
    "hidden_size", "n_embd", "d_model", "num_hidden_layers", "n_layer", "num_layers", "head_dim", "kv_channels",
    "intermediate_size", "ffn_hidden_size", "n_inner", "vocab_size", "padded_vocab_size", "num_experts",
    "num_local_experts", "n_routed_experts", "moe_num_experts", "shared_expert_intermediate_size",
    "n_shared_experts", "moe_intermediate_size", "num_experts_per_tok", "moe_topk", "top_k",
    "first_k_dense_replace",
)  # fmt: skip
_HEAD_KEYS = (
    "num_attention_heads", "n_head", "num_heads", "num_key_value_heads", "multi_query_group_num", "n_head_kv",
    "num_kv_heads",
)  # fmt: skip
_SHAPE_MAX = 1 << 31


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _checked_shape(cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """``cfg`` with each shape number range-checked (BadInput naming the file and key), and the names that
    must be text (``model_type``, ``architectures``) dropped when they are not."""
    from oomdoctor import inputs

    out = dict(cfg)
    for key in (*_SHAPE_KEYS, *_HEAD_KEYS):
        if out.get(key) is not None:
            low = 1 if key in _HEAD_KEYS else 0
            out[key] = inputs.as_int(out[key], path=source, key=key, low=low, high=_SHAPE_MAX)
    if not isinstance(out.get("model_type"), str):
        out["model_type"] = None
    architectures = out.get("architectures")
    if not (isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)):
        out["architectures"] = None
    return out


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def count_params(
    model: ModelFacts, traits: Mapping[str, Any] | None = None, *, first_dense_layers: int = 0
) -> tuple[int, int, int]:
    """(total, active per token, embedding) parameters from the shape.

    Embeddings, attention with grouped KV heads, the MLP (three matrices when gated), norms, the lm_head
    unless tied; MoE layers count every expert in the total and ``num_experts_per_tok`` in the active count.
    """
    traits = traits if traits is not None else family_traits(model.model_type)
    h = model.hidden_size or 0
    vocab = model.vocab_size or 0
    linear_bias = bool(traits.get("linear_bias"))
    norm_params = 2 * h if traits.get("norm") == "layernorm" else h  # LayerNorm carries a bias
    body_total, body_active = _body_params(model, traits, norm_params, first_dense_layers)
    embedding = vocab * h
    head = 0 if model.tie_word_embeddings else vocab * h + (vocab if linear_bias else 0)
    final_norm = norm_params
    total = embedding + body_total + head + final_norm
    active = embedding + body_active + head + final_norm
    return total, active, embedding + head


def _body_params(
    model: ModelFacts, traits: Mapping[str, Any], norm_params: int, first_dense_layers: int
) -> tuple[int, int]:
    """(total, active) parameters of the decoder layers; in a MoE the first ``first_dense_layers`` layers
    keep a dense MLP (DeepSeek's first_k_dense_replace)."""
    h = model.hidden_size or 0
    layers = model.num_layers or 0
    inter = model.intermediate_size or 4 * h
    linear_bias = bool(traits.get("linear_bias"))
    attention = _attention_params(model, traits)
    mlp_dense = _mlp_params(model, inter, linear_bias)
    norms = model.norms_per_layer * norm_params
    if not model.num_experts:
        return layers * (attention + mlp_dense + norms), layers * (attention + mlp_dense + norms)
    moe_total, moe_active = _moe_params(model, model.num_experts, inter, linear_bias)
    dense_layers = min(first_dense_layers, layers)
    sparse_layers = layers - dense_layers
    per_dense = attention + mlp_dense + norms
    body_total = dense_layers * per_dense + sparse_layers * (attention + moe_total + norms)
    body_active = dense_layers * per_dense + sparse_layers * (attention + moe_active + norms)
    return body_total, body_active


def _attention_params(model: ModelFacts, traits: Mapping[str, Any]) -> int:
    """One layer's attention: the q, k, v and o projections with grouped KV heads, their biases where the
    family has them, and the per-head q/k norms."""
    h = model.hidden_size or 0
    heads = model.num_attention_heads or 0
    kv = model.num_key_value_heads or heads
    hd = model.head_dim or (h // heads if heads else 0)
    linear_bias = bool(traits.get("linear_bias"))
    q_dim, kv_dim = heads * hd, kv * hd
    attention = h * q_dim + 2 * h * kv_dim + q_dim * h
    if traits.get("qkv_bias") or linear_bias:
        attention += q_dim + 2 * kv_dim
    if linear_bias:
        attention += h
    if model.qk_norm:
        attention += 2 * hd
    return attention


def _mlp_params(model: ModelFacts, width: int, linear_bias: bool) -> int:
    """A dense MLP of ``width``: gate, up and down when gated, else fc1 and fc2 (with biases if any)."""
    h = model.hidden_size or 0
    if model.gated_mlp:
        return 3 * h * width
    return 2 * h * width + ((width + h) if linear_bias else 0)


def _moe_params(model: ModelFacts, experts: int, inter: int, linear_bias: bool) -> tuple[int, int]:
    """(total, active) parameters of one MoE block: the routed experts, the shared expert, the router."""
    h = model.hidden_size or 0
    expert = _mlp_params(model, model.moe_intermediate_size or inter, linear_bias)
    shared = (
        _mlp_params(model, model.shared_expert_intermediate_size, linear_bias) + h
        if model.shared_expert_intermediate_size
        else 0
    )
    router = h * experts
    total = experts * expert + shared + router
    active = (model.num_experts_per_tok or 1) * expert + shared + router
    return total, active


# ---------------------------------------------------------------------------------------- lookups


def _hf_hub_dirs(environ: Mapping[str, str]) -> list[Path]:
    dirs: list[Path] = []
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if environ.get(key):
            dirs.append(Path(environ[key]).expanduser())
    if environ.get("HF_HOME"):
        dirs.append(Path(environ["HF_HOME"]).expanduser() / "hub")
    dirs.append(Path("~/.cache/huggingface/hub").expanduser())
    return dirs


def _modelscope_dirs(environ: Mapping[str, str]) -> list[Path]:
    dirs: list[Path] = []
    if environ.get("MODELSCOPE_CACHE"):
        root = Path(environ["MODELSCOPE_CACHE"]).expanduser()
        dirs += [root / "models", root, root / "hub" / "models", root / "hub"]
    home = Path("~/.cache/modelscope/hub").expanduser()
    dirs += [home / "models", home]
    return dirs


def _hf_snapshot_config(repo_dir: Path) -> Path | None:
    """config.json of the snapshot refs/main points to, else of the newest snapshot."""
    snapshots = repo_dir / "snapshots"
    ref = repo_dir / "refs" / "main"
    if ref.is_file():
        from oomdoctor import inputs

        with contextlib.suppress(BadInput, ValueError):  # a ref that is not a commit name: use the newest
            name = inputs.read_text(ref, what="file", max_bytes=4096).strip()
            candidate = snapshots / name / "config.json"
            if "/" not in name and name not in ("", ".", "..") and candidate.is_file():
                return candidate
    if not snapshots.is_dir():
        return None
    found = [p for p in snapshots.glob("*/config.json") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def find_config_json(
    name_or_path: str, *, base_dir: Path | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """Where the model's config.json is on this machine: a local folder, the Hugging Face cache or the
    ModelScope cache (``.`` in names is stored as ``___`` there). None when it is nowhere."""
    env = os.environ if environ is None else environ
    raw = name_or_path.strip()
    local_candidates = [Path(raw).expanduser()]
    if base_dir is not None and not Path(raw).is_absolute():
        local_candidates.append(base_dir / raw)
    for candidate in local_candidates:
        if candidate.is_dir() and (candidate / "config.json").is_file():
            return candidate / "config.json"
        if candidate.is_file() and candidate.name == "config.json":
            return candidate

    parts = [p for p in raw.split("/") if p]
    if len(parts) != 2 or raw.startswith(("/", ".", "~")):
        return None  # not a hub id ("Org/Name"); a missing local path is matched by name instead
    org, model = parts
    for hub in _hf_hub_dirs(env):
        found = _hf_snapshot_config(hub / f"models--{org}--{model}")
        if found is not None:
            return found
    for root in _modelscope_dirs(env):
        for folder in (model, model.replace(".", "___")):
            candidate = root / org / folder / "config.json"
            if candidate.is_file():
                return candidate
    return None


def read_config_json(path: Path, *, name: str | None = None) -> ModelFacts | None:
    """ModelFacts from a config.json file; None when it has no shape (hidden size, layers) or cannot be a
    model's config.json (not a regular file, too big, not a JSON object, nested too deep, a size that is not
    a whole number in range): the shape is an optional fact, and the built-in table may still know it."""
    from oomdoctor import inputs

    try:
        raw = inputs.read_json_object(path, what="model config.json")
        facts = model_from_config_dict(raw, source=f"config.json:{path}", name=name)
    except BadInput:
        return None
    if facts.hidden_size is None or facts.num_layers is None:
        return None
    return facts


def read_model(config: ConfigFacts, *, environ: Mapping[str, str] | None = None) -> ModelFacts:
    """The model's shape for a training config: config.json on this machine first, then the built-in
    table; a ModelFacts with ``source="unknown"`` (and no shape) when neither knows the model."""
    name = config.model_name_or_path
    if not name:
        return ModelFacts(name=None, source="unknown")
    base_dir = Path(config.path).parent if config.path and not config.path.startswith("<") else None
    path = find_config_json(name, base_dir=base_dir, environ=environ)
    if path is not None:
        facts = read_config_json(path, name=name)
        if facts is not None:
            return facts
    facts = model_from_name(name)
    if facts is not None:
        return facts
    return ModelFacts(name=name, source="unknown")
