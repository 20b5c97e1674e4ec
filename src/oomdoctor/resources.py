"""Where the bundled rules/ and configs/ live: the source tree when run from a checkout, else the wheel."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    checkout = _PKG.parent.parent / name  # src/oomdoctor -> repo root
    if checkout.is_dir():
        return checkout
    return _PKG / f"_{name}"


def rules_dir() -> Path:
    return _find("rules")


def configs_dir() -> Path:
    return _find("configs")
