"""The snapshot tests share the functional tests' user folder and scripted GPU."""

from __future__ import annotations

from functional.conftest import gpu_source, user_dir  # noqa: F401  (fixtures)
