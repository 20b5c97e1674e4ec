"""Write one proposed change into a new trial folder: config.yaml, change.json and any extra files.

The user's config is only read. The new folder gets the config with the change made in place (comments,
order and quoting kept, see ``yaml_edit``), a fresh ``output_dir`` inside the folder so no earlier run is
overwritten or resumed, and ``change.json`` saying what changed, why, and how to judge the result.

Relative paths (``dataset_dir: data``, a local model folder, a DeepSpeed JSON) are kept as the user wrote
them. LLaMA-Factory resolves them against the working directory of ``llamafactory-cli``, not the config's
folder, so the same values keep working when the command runs from the same place as before. That place
(``run_dir``) is found by checking where those paths exist; the printed command starts with ``cd run_dir``
when it is not the current folder, and ``change.json`` records it. Rewriting them to absolute paths would
put lines in the diff that the proposal never changed.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from oomdoctor import __version__, inputs
from oomdoctor.diagnosis import Proposal
from oomdoctor.errors import BadInput, one_line
from oomdoctor.facts.config import is_llamaboard_file, lf_knowledge, read_config_text
from oomdoctor.facts.types import to_jsonable
from oomdoctor.i18n import both, msg
from oomdoctor.patch.yaml_edit import EditError, KeyEdit, apply_edits

CONFIG_NAME = "config.yaml"
CHANGE_NAME = "change.json"
# The command as a script beside the config: terminals that ignore clipboard requests (JupyterLab's, many
# over SSH) still let the user run ``bash <folder>/command.sh`` or open it and copy the line.
COMMAND_NAME = "command.sh"
OUTPUT_SUBDIR = "output"
LAUNCHER = "llamafactory-cli train"
_RESERVED = {CONFIG_NAME, CHANGE_NAME, COMMAND_NAME, OUTPUT_SUBDIR}


@dataclass
class PatchResult:
    """What a patch wrote: the new folder, its config, the diff against the user's file and the command to run it."""

    folder: Path
    config_path: Path
    diff: str
    command: str
    change_json: Path
    run_dir: Path | None = None  # where the command must run for relative paths to resolve
    files: list[Path] = field(default_factory=list)  # extra files written beside the config
    written: dict[str, list[Any]] = field(default_factory=dict)  # every key written: {key: [old, new]}
    env: dict[str, str] = field(default_factory=dict)
    relative_paths: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> {value, resolved}
    command_file: Path | None = None  # command.sh: the command, runnable from any folder


def write_patched_config(
    config_path: str | os.PathLike[str],
    proposal: Proposal,
    out_dir: str | os.PathLike[str],
    *,
    parent: str | None = None,
) -> PatchResult:
    """Write ``proposal`` applied to ``config_path`` into the new folder ``out_dir``; return what was written.

    BadInput when ``out_dir`` exists, the config is unusable, or it no longer holds the values the proposal
    was made for (it was edited since the diagnosis). A proposal with nothing to write is a ValueError.
    """
    source = Path(config_path).expanduser().absolute()
    text = read_config_text(source)
    raw = _load_raw(source, text)
    out = inputs.check_new_folder(out_dir)
    _check_proposal(source, raw, proposal)
    edited, written = _edited_text(source, text, raw, proposal, out)
    launch = _plan_launch(source, raw, proposal, edited, out)
    change = _change_record(source, proposal, written, launch, parent=parent)
    script = command_script(launch.config, env=launch.env, run_dir=launch.run_dir)
    files = _write_folder(out, edited, {**proposal.files, COMMAND_NAME: script}, change)
    (out / COMMAND_NAME).chmod(0o755)
    return PatchResult(
        folder=out,
        config_path=launch.config,
        diff=_diff(text, edited, source, launch.config),
        command=launch.command,
        change_json=out / CHANGE_NAME,
        run_dir=launch.run_dir,
        files=[f for f in files if f.name != COMMAND_NAME],
        written=written,
        env=launch.env,
        relative_paths=launch.relative,
        command_file=out / COMMAND_NAME,
    )


@dataclass(frozen=True)
class _Launch:
    """How the patched config runs: its path, the folder to start in, the environment and the command."""

    config: Path
    run_dir: Path | None
    relative: dict[str, dict[str, Any]]  # key -> {value, resolved}
    env: dict[str, str]
    command: str


def _check_proposal(source: Path, raw: dict[str, Any], proposal: Proposal) -> None:
    """ValueError for a proposal with nothing to write or an unsafe file name; BadInput when the config no
    longer holds the values the proposal was made for."""
    if not (proposal.changes or proposal.env or proposal.files):
        raise ValueError(f"proposal {proposal.rule!r} has nothing to write (manual advice)")
    _check_file_names(proposal)
    _check_not_stale(source, raw, proposal)


def _edited_text(
    source: Path, text: str, raw: dict[str, Any], proposal: Proposal, out: Path
) -> tuple[str, dict[str, list[Any]]]:
    """The config's text with the proposal's edits made in place, and every key written
    (``{key: [old, new]}``)."""
    edits, written = _plan_edits(raw, proposal, out)
    try:
        edited = apply_edits(text, edits, rule=proposal.rule)
    except EditError as err:
        raise BadInput(msg("patch_cannot_edit", None, path=source, detail=err)) from None
    return edited.text, written


def _plan_launch(source: Path, raw: dict[str, Any], proposal: Proposal, edited: str, out: Path) -> _Launch:
    """Where the patched config must run for its relative paths to resolve (that no earlier run folder is
    the new folder is checked again there), with which environment, and the command."""
    final = inputs.load_yaml(edited, path=one_line(out / CONFIG_NAME))
    run_dir, relative = find_run_dir(final, source.parent)
    inputs.check_new_folder(out, protected=run_folders(raw, run_dir))
    env = _launch_env(proposal, final)
    config_out = out / CONFIG_NAME
    command = build_command(config_out, env=env, run_dir=run_dir)
    return _Launch(config=config_out, run_dir=run_dir, relative=relative, env=env, command=command)


def _diff(text: str, edited: str, source: Path, config_out: Path) -> str:
    """The unified diff from the user's config to the patched one."""
    return "".join(
        difflib.unified_diff(
            text.splitlines(keepends=True),
            edited.splitlines(keepends=True),
            fromfile=str(source),
            tofile=str(config_out),
        )
    )


def _change_record(
    source: Path, proposal: Proposal, written: dict[str, list[Any]], launch: _Launch, *, parent: str | None
) -> dict[str, Any]:
    """What ``change.json`` holds: where the config came from, the proposal, what was written, how to run it."""
    return {
        "parent": parent or _default_parent(source),
        "source_config": str(source),
        "rule": proposal.rule,
        "title": proposal.title,
        "cause": proposal.cause,
        "changes": to_jsonable(proposal.changes),
        "written": to_jsonable(written),
        "env": launch.env,
        "files": sorted(proposal.files),
        "why": proposal.why,
        "cost": proposal.cost,
        "judge": proposal.judge,
        "already_on": proposal.already_on,
        "requires": proposal.requires,
        "effect": to_jsonable(proposal.effect),
        "run_dir": str(launch.run_dir) if launch.run_dir else None,
        "relative_paths": launch.relative,
        "paths_note": both("patch_paths_note"),
        "command": launch.command,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "oomdoctor_version": __version__,
    }


# ------------------------------------------------------------------------------------------- checks


def _load_raw(source: Path, text: str) -> dict[str, Any]:
    raw = inputs.load_yaml(text, path=one_line(source))  # aliases, depth and numbers bounded
    if raw is None:
        raise BadInput(msg("config_empty", None, path=source))
    if not isinstance(raw, dict):
        raise BadInput(msg("yaml_not_mapping", None, path=source))
    if is_llamaboard_file(raw):
        raise BadInput(msg("config_is_llamaboard", None, path=source))
    return raw


def _check_file_names(proposal: Proposal) -> None:
    for name in proposal.files:
        if Path(name).name != name or name in _RESERVED or name.startswith("."):
            raise ValueError(f"proposal {proposal.rule!r}: file name {name!r} must be a plain new file name")


def _same(written: Any, expected: Any) -> bool:
    """Loose equality between a config value and the proposal's "old" (the WebUI may write "4" for 4)."""
    if written == expected:
        return True
    if isinstance(written, bool) or isinstance(expected, bool):
        return str(written).strip().lower() == str(expected).strip().lower()
    try:
        return float(str(written).strip()) == float(str(expected).strip())
    except ValueError:
        return str(written).strip() == str(expected).strip()


def _check_not_stale(source: Path, raw: dict[str, Any], proposal: Proposal) -> None:
    for key, (old, _new) in proposal.changes.items():
        if key in ("deepspeed", "output_dir") or old is None or raw.get(key) is None:
            continue  # paths are rewritten anyway; an absent key holds LLaMA-Factory's default
        if not _same(raw[key], old):
            raise BadInput(msg("patch_stale", None, path=source, field=key, now=raw[key], expected=old))


# ------------------------------------------------------------------------------------------ planning


def _plan_edits(
    raw: dict[str, Any], proposal: Proposal, out: Path
) -> tuple[list[KeyEdit], dict[str, list[Any]]]:
    """The key edits to make, and ``{key: [old as written, new as written]}`` for change.json."""
    edits: list[KeyEdit] = []
    written: dict[str, list[Any]] = {}
    changes = dict(proposal.changes)

    ds_file = _deepspeed_file(proposal)
    if ds_file is not None and "deepspeed" not in changes:
        changes["deepspeed"] = [raw.get("deepspeed"), ds_file]

    for key, (old, new) in changes.items():
        if key == "output_dir":
            continue  # the trial folder owns output_dir
        value = new
        if key == "deepspeed" and isinstance(new, str) and new in proposal.files:
            value = str(out / new)
        if value is None:
            if key in raw:
                edits.append(KeyEdit(key, remove=True))
                written[key] = [raw[key], None]
            continue
        note = None
        if key not in raw or raw.get(key) is None:
            note = f"was {_text(old)} (LLaMA-Factory default)" if old is not None else None
        edits.append(KeyEdit(key, value, note=note))
        written[key] = [raw.get(key), value]

    output_dir = str(out / OUTPUT_SUBDIR)
    edits.append(
        KeyEdit("output_dir", output_dir, note=None if raw.get("output_dir") else "fresh output folder")
    )
    written["output_dir"] = [raw.get("output_dir"), output_dir]
    return edits, written


def _text(value: Any) -> str:
    from oomdoctor.patch.yaml_edit import render_scalar

    return render_scalar(value)


def _deepspeed_file(proposal: Proposal) -> str | None:
    """The DeepSpeed JSON among the proposal's files (a dict with ``zero_optimization``), if exactly one."""
    names = [
        name
        for name, content in proposal.files.items()
        if isinstance(content, dict) and "zero_optimization" in content
    ]
    return names[0] if len(names) == 1 else None


# ---------------------------------------------------------------------------------- where to run it


def _input_paths(final: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, relative path) pairs in the config that must exist when training starts."""
    knowledge = lf_knowledge()
    comma_keys = set(knowledge["comma_separated_path_keys"])
    out: list[tuple[str, str]] = []
    for key in knowledge["input_path_keys"]:
        value = final.get(key)
        if key == "dataset_dir" and value is None and final.get("dataset"):
            value = knowledge["defaults"]["dataset_dir"]  # LLaMA-Factory's default, relative to the cwd
        if not isinstance(value, str) or not value.strip():
            continue
        if key == "dataset_dir" and value.strip() == knowledge["dataset_dir_online"]:
            continue
        parts = value.split(",") if key in comma_keys else [value]
        for part in parts:
            part = part.strip()
            if part and not Path(part).expanduser().is_absolute():
                out.append((key, part))
    return out


def _recorded_run_dir(config_dir: Path) -> Path | None:
    """A trial folder's change.json remembers where its chain of configs runs (None when it cannot say)."""
    change = config_dir / CHANGE_NAME
    if not change.exists():
        return None
    try:
        value = inputs.read_json_object(change, what="change.json").get("run_dir")
    except BadInput:
        return None
    return Path(value) if isinstance(value, str) and value and "\x00" not in value else None


def run_folders(raw: dict[str, Any], run_dir: Path | None) -> dict[str, Path]:
    """The folders of the user's run that a new folder must never be put inside: ``output_dir`` (its
    checkpoints), ``dataset_dir`` and a local model folder, resolved from where the run starts."""
    knowledge = lf_knowledge()
    base = run_dir if run_dir is not None else Path.cwd()
    folders: dict[str, Path] = {}
    for key in ("output_dir", "dataset_dir", "model_name_or_path"):
        value = raw.get(key)
        if key == "dataset_dir" and value is None and raw.get("dataset"):
            value = knowledge["defaults"]["dataset_dir"]
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            continue
        if key == "dataset_dir" and value.strip() == knowledge["dataset_dir_online"]:
            continue
        path = Path(value.strip()).expanduser()
        path = path if path.is_absolute() else base / path
        if key == "model_name_or_path" and not path.is_dir():
            continue  # a hub id, not a folder of this machine
        folders[key] = path
    return folders


def find_run_dir(final: dict[str, Any], config_dir: Path) -> tuple[Path | None, dict[str, dict[str, Any]]]:
    """The folder from which the most relative input paths exist (the cwd wins ties), and each path's fate.

    Returns ``(None, {})`` when the config has no relative input paths: it runs from anywhere.
    """
    inputs = _input_paths(final)
    if not inputs:
        return None, {}
    cwd = Path.cwd().resolve()
    candidates: list[Path] = []
    recorded = _recorded_run_dir(config_dir)
    for c in [recorded, cwd, config_dir, *list(config_dir.resolve().parents)[:3]]:
        if c is not None and c.resolve() not in candidates:
            candidates.append(c.resolve())
    best, best_score = cwd, 0
    for candidate in candidates:
        score = sum((candidate / rel).exists() for _key, rel in inputs)
        if score > best_score:
            best, best_score = candidate, score
    relative: dict[str, dict[str, Any]] = {}
    for key, rel in inputs:
        target = best / rel
        entry = relative.setdefault(key, {"value": final.get(key), "resolved": []})
        entry["resolved"].append(str(target) if target.exists() else None)
    return best, relative


def _launch_env(proposal: Proposal, final: dict[str, Any]) -> dict[str, str]:
    env = {str(k): str(v) for k, v in proposal.env.items()}
    if final.get("deepspeed"):
        for key, value in lf_knowledge()["deepspeed_launch_env"].items():
            env.setdefault(str(key), str(value))
    return env


def build_command(config: Path, *, env: dict[str, str] | None = None, run_dir: Path | None = None) -> str:
    """The exact shell line: ``[cd DIR && ][VAR=value ...] llamafactory-cli train /abs/config.yaml``."""
    parts: list[str] = []
    if run_dir is not None and run_dir.resolve() != Path.cwd().resolve():
        parts.append(f"cd {shlex.quote(str(run_dir))} &&")
    parts.extend(f"{key}={shlex.quote(value)}" for key, value in (env or {}).items())
    parts.append(f"{LAUNCHER} {shlex.quote(str(config))}")
    return " ".join(parts)


def command_script(config: Path, *, env: dict[str, str] | None = None, run_dir: Path | None = None) -> str:
    """``command.sh``: the same command, starting with ``cd`` to where it must run (``run_dir``, else the
    folder it was written from), so ``bash command.sh`` works from anywhere."""
    where = run_dir if run_dir is not None else Path.cwd()
    words = [f"{key}={shlex.quote(value)}" for key, value in (env or {}).items()]
    words.append(f"{LAUNCHER} {shlex.quote(str(config))}")
    return (
        "#!/usr/bin/env bash\n"
        "# Written by oomdoctor: the training command for this change (run: bash command.sh).\n"
        "set -e\n"
        f"cd {shlex.quote(str(where))}\n"
        f"{' '.join(words)}\n"
    )


def _default_parent(source: Path) -> str:
    """The trial folder when patching a trial's config (so chains can be followed), else the config."""
    if source.name == CONFIG_NAME and (source.parent / CHANGE_NAME).is_file():
        return str(source.parent)
    return str(source)


# ------------------------------------------------------------------------------------------ writing


def _write_folder(out: Path, config_text: str, files: dict[str, Any], change: dict[str, Any]) -> list[Path]:
    """Claim ``out`` with ``os.mkdir`` (fails on anything there, a symlink included), write everything into a
    hidden sibling, then rename it over the empty claimed folder: no half-written trial folders."""
    inputs.make_new_folder(out)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        with (staging / CONFIG_NAME).open("w", encoding="utf-8", newline="") as f:
            f.write(config_text)
        for name, content in files.items():
            target = staging / name
            if isinstance(content, bytes):
                target.write_bytes(content)
            elif isinstance(content, str):
                target.write_text(content, encoding="utf-8")
            else:
                target.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (staging / CHANGE_NAME).write_text(
            json.dumps(change, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        staging.chmod(0o755)  # mkdtemp makes it private; a trial folder is an ordinary folder
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            out.rmdir()  # our empty claim; never anything with content
        raise
    return [out / name for name in files]
