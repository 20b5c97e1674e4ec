"""Footer texts in the user's language: each binding's description and tooltip come from the catalogue
(``key_<binding id>`` and ``key_<binding id>_tip``), so switching language re-labels the footer too. Every
binding of the app is made by ``bind``, so none carries words of its own."""

from __future__ import annotations

from dataclasses import replace

from textual.binding import Binding
from textual.dom import DOMNode

from oomdoctor.i18n import Lang
from oomdoctor.tui.strings import TEXTS, t


def words_of(binding_id: str) -> str:
    """The catalogue name of a binding's words: its id, less a trailing number (``answer_2``, one of the
    hidden keys 2-9, reads as ``answer``)."""
    head, _, tail = binding_id.rpartition("_")
    return head if head and tail.isdigit() else binding_id


def bind(keys: str, action: str, *, id: str, show: bool = True, key_display: str | None = None) -> Binding:
    """A binding whose description and tooltip are the catalogue's ``key_<id>`` and ``key_<id>_tip``, in
    English until its screen relabels it in the user's language (``localize_bindings``)."""
    words = words_of(id)
    return Binding(keys, action, t(f"key_{words}", "en"), show=show, key_display=key_display, id=id,
                   tooltip=t(f"key_{words}_tip", "en"))  # fmt: skip


def localized(binding: Binding, lang: Lang) -> Binding:
    if binding.id is None or f"key_{words_of(binding.id)}" not in TEXTS:
        return binding
    words = words_of(binding.id)
    tip_key = f"key_{words}_tip"
    return replace(
        binding,
        description=t(f"key_{words}", lang),
        tooltip=t(tip_key, lang) if tip_key in TEXTS else binding.tooltip,
    )


def localize_bindings(node: DOMNode, lang: Lang) -> None:
    """Replace ``node``'s bindings with copies labelled in ``lang``. Each node holds its own map of
    lists, so replacing the lists (never mutating them) leaves the class defaults alone."""
    mapping = node._bindings.key_to_bindings
    for key, bindings in list(mapping.items()):
        mapping[key] = [localized(b, lang) for b in bindings]
