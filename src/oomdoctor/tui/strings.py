"""Every text the TUI shows, in English and Chinese, looked up with ``t(key, lang)``: the ``tui`` group of
the one catalogue (``oomdoctor/catalogue/{en,zh}.yaml``), then its ``shared`` group.

Rule texts (titles, why, cost, judge) come from the rules themselves. No textual import: the catalogue is
checked by plain unit tests.
"""

from __future__ import annotations

from collections.abc import Mapping

from oomdoctor import catalogue
from oomdoctor.i18n import Lang

# The app's texts: the ``tui`` group of the catalogue (``oomdoctor/catalogue/{en,zh}.yaml``), then ``shared``.
TEXTS: Mapping[str, Mapping[str, str]] = catalogue.Group("tui")


def t(key: str, lang: Lang, **fields: object) -> str:
    """The interface text ``key`` in ``lang`` with ``fields`` filled in."""
    return TEXTS[key][lang].format(**fields)
