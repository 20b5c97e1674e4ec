"""Export the decision-node schema as JSON Schema (``rules.schema.json`` at the repo root), so editors can
check rule files as they are written. The pydantic models are the source; a test checks the committed file
equals what this module generates.

Regenerate after changing the models or the operator registry:
``python -m oomdoctor.rules.schema`` (writes ``rules.schema.json`` beside ``rules/``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from oomdoctor.rules.model import RuleNode, change_op_json_schema, condition_json_schema

SCHEMA_ID = "https://oomdoctor.invalid/rules.schema.json"


def rules_json_schema() -> dict[str, Any]:
    """The JSON Schema of one rule file, with conditions and change operators in their YAML form."""
    schema = RuleNode.model_json_schema(by_alias=True)
    defs = schema["$defs"]
    defs["Condition"] = condition_json_schema({"$ref": "#/$defs/Condition"})
    defs["ChangeOp"] = change_op_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "oomdoctor decision node (rules/*.yaml)",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def rules_json_schema_text() -> str:
    return json.dumps(rules_json_schema(), ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def default_schema_path() -> Path:
    from oomdoctor.resources import rules_dir

    return rules_dir().parent / "rules.schema.json"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else default_schema_path()
    target.write_text(rules_json_schema_text(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
