"""Which environment variables a trial may take from ``change.json``: an allow-list of memory settings.

``change.json`` sits beside a config in a folder that may come from someone else. If it could set any
variable, it could set ``PATH`` (our ``llamafactory-cli`` becomes theirs), ``LD_PRELOAD``, ``PYTHONPATH``,
``BASH_ENV``... and ``oomdoctor trial`` would run their code. So a trial applies only variables that change
how memory is managed, each with a value of the form that setting takes, and refuses the folder otherwise
(nothing is run). Variables the user types on the command line (``--launcher "VAR=1 llamafactory-cli
train"``) are the user's own and are not filtered here.

The list, and why each is on it:

- ``PYTORCH_CUDA_ALLOC_CONF``, ``PYTORCH_ALLOC_CONF`` (its newer name), ``PYTORCH_HIP_ALLOC_CONF`` (ROCm):
  the caching allocator's settings, what the fragmentation rule proposes (``expandable_segments:True``).
  Values are ``key:value`` pairs separated by commas.
- ``FORCE_TORCHRUN``: LLaMA-Factory's switch to start through torchrun, which the patch writer adds when it
  writes a DeepSpeed config (DeepSpeed needs it). Only ``0`` or ``1``.

``CUDA_VISIBLE_DEVICES`` is deliberately not on it: it picks which card runs, not how memory is used, so a
prepared folder could move the trial to another user's card or hide the card whose limits are under test.
Whoever wants it sets it in their own shell or ``--launcher``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oomdoctor.errors import BadInput, one_line
from oomdoctor.i18n import msg

_ALLOC_CONF = re.compile(r"[A-Za-z0-9_]+:[A-Za-z0-9_.]+(,[A-Za-z0-9_]+:[A-Za-z0-9_.]+)*")
_MAX_VALUE = 256

ALLOWED: dict[str, re.Pattern[str]] = {
    "PYTORCH_CUDA_ALLOC_CONF": _ALLOC_CONF,
    "PYTORCH_ALLOC_CONF": _ALLOC_CONF,
    "PYTORCH_HIP_ALLOC_CONF": _ALLOC_CONF,
    "FORCE_TORCHRUN": re.compile(r"[01]"),
}


def allowed_change_env(env: Any, *, path: Path | str) -> dict[str, str]:
    """The environment ``change.json`` asks for, when every name is on the allow-list and every value has
    its setting's form; BadInput naming the file and the refused names otherwise. ``None`` is no change."""
    if env is None:
        return {}
    shown = one_line(path)
    if not isinstance(env, Mapping):
        raise BadInput(
            msg(
                "in_bad_type",
                None,
                path=shown,
                key="env",
                expected="a mapping of names to values",
                got=type(env).__name__,
            )
        )
    refused: list[str] = []
    out: dict[str, str] = {}
    for name, value in env.items():
        pattern = ALLOWED.get(name) if isinstance(name, str) else None
        text = value if isinstance(value, str) else None
        if pattern is None or text is None or len(text) > _MAX_VALUE or not pattern.fullmatch(text):
            refused.append(one_line(name)[:60] if pattern is None else f"{name}={one_line(value)[:60]}")
            continue
        out[name] = text
    if refused:
        raise BadInput(
            msg("env_refused", None, path=shown, names=", ".join(refused[:8]), allowed=", ".join(ALLOWED))
        )
    return out


def shown_env(env: Mapping[str, str]) -> str:
    """``A=1 B=x`` for the line the user sees before launch."""
    return " ".join(f"{name}={one_line(value)}" for name, value in env.items())
