"""The DeepSpeed templates shipped in ``configs/deepspeed/`` (what the rules' write-deepspeed-template uses).

They follow the names of LLaMA-Factory's examples/deepspeed so that users recognise them; "auto" values
are filled in by the transformers Trainer from the training arguments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from oomdoctor.resources import configs_dir


def deepspeed_templates_dir() -> Path:
    return configs_dir() / "deepspeed"


def deepspeed_template_names() -> list[str]:
    return sorted(p.name for p in deepspeed_templates_dir().glob("*.json"))


def load_deepspeed_template(name: str) -> dict[str, Any]:
    """The template as a dict, e.g. ``load_deepspeed_template("ds_z3_offload_config.json")``.

    A name that is not shipped is a rule author's mistake, so it raises ValueError (not BadInput).
    """
    if not name.endswith(".json"):
        name += ".json"
    path = deepspeed_templates_dir() / name
    if Path(name).name != name or not path.is_file():
        raise ValueError(f"no DeepSpeed template {name!r}; shipped: {', '.join(deepspeed_template_names())}")
    with path.open(encoding="utf-8") as f:
        template: dict[str, Any] = json.load(f)
    return template
