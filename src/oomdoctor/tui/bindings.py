"""Footer texts in the user's language: each binding's description and tooltip come from the catalog
(``key_<binding id>`` and ``key_<binding id>_tip``), so switching language re-labels the footer too."""

from __future__ import annotations

from dataclasses import replace

from textual.binding import Binding
from textual.dom import DOMNode

from oomdoctor.i18n import Lang
from oomdoctor.tui.strings import TEXTS, t


def localized(binding: Binding, lang: Lang) -> Binding:
    if binding.id is None or f"key_{binding.id}" not in TEXTS:
        return binding
    tip_key = f"key_{binding.id}_tip"
    return replace(
        binding,
        description=t(f"key_{binding.id}", lang),
        tooltip=t(tip_key, lang) if tip_key in TEXTS else binding.tooltip,
    )


def localize_bindings(node: DOMNode, lang: Lang) -> None:
    """Replace ``node``'s bindings with copies labelled in ``lang``. Each node holds its own map of
    lists, so replacing the lists (never mutating them) leaves the class defaults alone."""
    mapping = node._bindings.key_to_bindings
    for key, bindings in list(mapping.items()):
        mapping[key] = [localized(b, lang) for b in bindings]
