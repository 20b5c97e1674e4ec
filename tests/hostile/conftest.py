"""Hypothesis profiles for the property tests: a small default so the suite stays fast, and ``hostile10k``
(10,000 examples per reader) selected with ``OOMDOCTOR_HYPOTHESIS=hostile10k``."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("hostile10k", max_examples=10_000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
settings.load_profile(os.environ.get("OOMDOCTOR_HYPOTHESIS", "ci"))
