"""The headless core never imports textual, and nothing on the start-up path imports the training stack.

Each check imports in a fresh interpreter and inspects ``sys.modules``, so an import anywhere in the chain
(not only at the top of the module under test) is caught.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

HEAVY = ("torch", "transformers", "datasets", "llamafactory", "peft", "trl", "accelerate")
CORE = (
    "oomdoctor.api",
    "oomdoctor.facts.config",
    "oomdoctor.facts.log",
    "oomdoctor.facts.gpu",
    "oomdoctor.facts.model",
    "oomdoctor.facts.dataset",
    "oomdoctor.rules.engine",
    "oomdoctor.estimate",
    "oomdoctor.patch",
    "oomdoctor.trial",
    "oomdoctor.demo",
)


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {m.split(".")[0] for m in json.loads(out.stdout.strip().splitlines()[-1])}


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_neither_textual_nor_training_stack(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert "textual" not in loaded, f"{module} pulls in textual"
    assert not loaded & set(HEAVY), f"{module} pulls in {sorted(loaded & set(HEAVY))}"


def test_cli_parser_start_up_is_light() -> None:
    # Building the parser imports every command module: all of them must stay light.
    loaded = _loaded_after("from oomdoctor.cli import build_parser; build_parser()")
    assert "textual" not in loaded
    assert not loaded & set(HEAVY)


def test_tui_does_not_import_training_stack() -> None:
    loaded = _loaded_after("import oomdoctor.tui.app")
    assert "textual" in loaded
    assert not loaded & set(HEAVY)


def test_import_linter_contract_is_kept() -> None:
    """The same boundary as a static contract (pyproject.toml [tool.importlinter]), over every import."""
    from pathlib import Path

    lint = Path(sys.executable).parent / "lint-imports"
    if not lint.exists():
        pytest.skip("import-linter is not installed (dev extra)")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([str(lint)], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:]
    # the headless core; the floors of the house; the floors of the app (tui)
    assert "3 kept, 0 broken" in out.stdout


def _tui_graph() -> Any:
    """Every import of the package as grimp (import-linter's graph library) reads it, imports inside
    functions and under ``TYPE_CHECKING`` included."""
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (dev extra)")
    return grimp.build_graph("oomdoctor", cache_dir=None)


def test_no_import_cycle_inside_the_tui() -> None:
    """No module of the app imports, directly or through others, a module that imports it back."""
    graph = _tui_graph()
    tui = sorted(m for m in graph.find_descendants("oomdoctor.tui"))
    assert len(tui) > 10, tui  # the app's modules were found
    cycles = [
        (module, imported)
        for module in tui
        for imported in sorted(graph.find_modules_directly_imported_by(module))
        if imported.startswith("oomdoctor.tui.") and graph.chain_exists(imported=module, importer=imported)
    ]
    assert cycles == []


def test_only_the_factory_imports_the_app() -> None:
    """Screens and widgets ask the app for work by messages: none imports it, not even for a type."""
    graph = _tui_graph()
    importers = graph.find_modules_that_directly_import("oomdoctor.tui.app")
    assert {m for m in importers if m.startswith("oomdoctor.tui.")} == {"oomdoctor.tui.factory"}
