"""The words an OOM message itself adds on where it happened ("Occurs during ZeRO optimizer state
initialization." on the line after DeepSpeed's message): they set the failure's context as a marker would, though
they come after its line. The words are data (``message_contexts`` in log_markers.yaml).
"""

from __future__ import annotations

import re
from functools import lru_cache

from oomdoctor.datafiles import load_data_file
from oomdoctor.facts.log_tables import MARKERS_FILE
from oomdoctor.lazyre import lazy
from oomdoctor.text import Text


@lru_cache(maxsize=1)
def _entries() -> tuple[tuple[str, re.Pattern[str], Text], ...]:
    raw = load_data_file(MARKERS_FILE)
    return tuple(
        (
            str(e["context"]),
            lazy(e["pattern"]),
            Text(en=str(e["why"]["en"]), zh=str(e["why"].get("zh", e["why"]["en"]))),
        )
        for e in raw.get("message_contexts") or ()
    )


def message_context(line: str) -> tuple[str, Text] | None:
    """The context (a marker's: load / zero_init / ...) and its reason, when this line of an OOM message says
    where it happened; None otherwise."""
    for context, pattern, why in _entries():
        if pattern.search(line):
            return context, why
    return None
