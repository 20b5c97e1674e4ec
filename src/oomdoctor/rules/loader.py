"""Load and validate ``rules/*.yaml``: one decision node per file.

Every problem is a load error that names the file and the line (found by composing the YAML document,
whose nodes keep their marks): malformed YAML, an unknown operator, a missing zh or en text, a fact path
that no fact has, a duplicate id, a ``next`` that names no node. Rules are knowledge; a typo in them must
fail loudly, never make a node silently stop matching.

Validating takes pydantic and a YAML parse of every file, most of a start's time; so the validated nodes are
kept in the user cache (``compiled.py``), keyed by the files' contents, and a start whose files are unchanged
reads that instead. ``oomdoctor rules check`` validates a folder of rule files afresh.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomdoctor.errors import BadInput
from oomdoctor.i18n import msg
from oomdoctor.lazyre import lazy
from oomdoctor.records import field, record
from oomdoctor.rules import nodes
from oomdoctor.rules.nodes import RuleNode
from oomdoctor.rules.questions import BUILTIN_QUESTIONS

if TYPE_CHECKING:
    import yaml

    from oomdoctor.rules import model

# Placeholders in texts: {config.cutoff_len}, {new.per_device_train_batch_size}, {log.requested_mib:.0f}
PLACEHOLDER = lazy(r"\{([a-z_][a-z0-9_]*(?:\.[A-Za-z0-9_]+)+)(?::([^{}]*))?\}")
ENV_NAME = lazy(r"^[A-Z][A-Z0-9_]*$")
TEXT_FIELDS = ("title", "why", "cost", "judge", "docs")


class RuleLoadError(BadInput):
    """A rule file is unusable. ``str()`` is one line: ``<file>:<line>: <what is wrong>``."""

    def __init__(self, file: Path | str, line: int | None, detail: str) -> None:
        self.file = str(file)
        self.line = line
        self.detail = detail
        where = f"{self.file}:{line}" if line is not None else self.file
        super().__init__(f"{where}: {detail}")


@record(frozen=True)
class LoadedNode:
    """A validated node and where it came from (``root``: the parsed YAML, kept only while validating)."""

    node: nodes.RuleNode
    file: Path
    line: int
    root: yaml.Node | None = field(default=None, repr=False, compare=False)  # for line numbers


@record(frozen=True)
class QuestionSpec:
    """A question a node may ask: built in (texts in i18n) or defined in a rule file."""

    key: str
    allowed: tuple[str, ...]
    builtin: bool
    node_id: str | None = None  # the node that defined it (custom questions)


@record
class RuleSet:
    """The validated decision nodes of one rules folder."""

    directory: Path
    nodes: list[LoadedNode] = field(default_factory=list)  # sorted by (rank, id)

    def __post_init__(self) -> None:
        self.by_id: dict[str, LoadedNode] = {n.node.id: n for n in self.nodes}
        self.questions: dict[str, QuestionSpec] = {
            key: QuestionSpec(key, values, builtin=True) for key, values in BUILTIN_QUESTIONS.items()
        }
        for loaded in self.nodes:
            ask = loaded.node.ask
            if ask is not None and ask.key not in self.questions and ask.answers:
                self.questions[ask.key] = QuestionSpec(
                    ask.key, tuple(a.value for a in ask.answers), builtin=False, node_id=loaded.node.id
                )

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, rule_id: str) -> RuleNode:
        return self.by_id[rule_id].node


# --- locating a problem in the YAML --------------------------------------------------------------------


def _child(node: yaml.Node, part: Any) -> tuple[yaml.Node | None, yaml.Node | None]:
    """(key node, value node) of ``part`` inside ``node``; (None, None) when it is not there."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return key, value
    elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return node.value[part], node.value[part]
    return None, None


def line_of(root: yaml.Node | None, loc: tuple[Any, ...], key: str | None = None) -> int | None:
    """The 1-based line of the deepest part of ``loc`` that exists (and of ``key`` inside it, if given)."""
    if root is None:
        return None
    node = root
    mark_node = root
    for part in loc:
        key_node, value = _child(node, part)
        if value is None:
            break
        node, mark_node = value, key_node or value
    if key is not None:
        key_node, _ = _child(node, key)
        if key_node is not None:
            mark_node = key_node
    return mark_node.start_mark.line + 1


def _loc_text(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


def _pydantic_problem(err: dict[str, Any], root: yaml.Node | None) -> tuple[int | None, str]:
    loc = tuple(err["loc"])
    ctx = err.get("ctx") or {}
    where = _loc_text(loc)
    if err["type"] == "missing":
        *parent, name = loc
        line = line_of(root, tuple(parent))
        if name in ("en", "zh"):
            return line, msg("rule_missing_text", None, language=name, where=_loc_text(tuple(parent)))
        return line, msg("rule_missing_field", None, name=name, where=_loc_text(tuple(parent)))
    if err["type"] == "extra_forbidden":
        *parent, name = loc
        return line_of(root, tuple(parent), key=str(name)), msg(
            "rule_unknown_field", None, name=name, where=where
        )
    if err["type"] == "unknown_operator":
        return line_of(root, loc, key=str(ctx.get("key"))), msg(
            "rule_unknown_operator", None, op=ctx.get("key"), where=where, known=ctx.get("known")
        )
    return line_of(root, loc, key=str(ctx["key"]) if "key" in ctx else None), f"{where}: {err['msg']}"


# --- fact paths ------------------------------------------------------------------------------------------


def fact_path_problem(path: str) -> str | None:
    """Why ``path`` names no fact (None when it does): ``rules/fact_paths.py`` checks it against the typed
    bundle (imported here, on validation, not on the start-up path)."""
    from oomdoctor.rules.fact_paths import fact_path_problem as problem

    return problem(path)


# --- one file --------------------------------------------------------------------------------------------


def _compose(path: Path, text: str) -> tuple[Any, yaml.Node | None]:
    import yaml

    try:
        # One parse (in C where libyaml is present) gives both the nodes, for line numbers, and the data.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
        try:
            root = loader.get_single_node()
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise RuleLoadError(path, line, msg("rule_bad_yaml", None, detail=str(err).splitlines()[0])) from None
    return data, root


def _check_texts(node: model.RuleNode, root: yaml.Node | None, path: Path) -> None:
    fields = set(node.change)
    if node.write_deepspeed_template is not None:
        fields.add("deepspeed")
    texts: list[tuple[tuple[Any, ...], Any]] = [((name,), getattr(node, name)) for name in TEXT_FIELDS]
    texts += [(("guards", i, "reason"), g.reason) for i, g in enumerate(node.guards)]
    for loc, text in texts:
        for lang in ("en", "zh"):
            for match in PLACEHOLDER.finditer(getattr(text, lang)):
                ref = match.group(1)
                head, _, rest = ref.partition(".")
                if head in ("old", "new"):
                    problem = None if rest in fields else f"{head}.{rest}: this node does not change {rest!r}"
                else:
                    problem = fact_path_problem(ref)
                if problem:
                    raise RuleLoadError(
                        path,
                        line_of(root, (*loc, lang)),
                        msg("rule_bad_placeholder", None, ref=ref, problem=problem),
                    )


def _check_fact_paths(node: model.RuleNode, root: yaml.Node | None, path: Path) -> None:
    refs: list[tuple[str, tuple[Any, ...]]] = [(p, ("when", *loc)) for p, loc in node.when.fact_paths()]
    for i, guard in enumerate(node.guards):
        refs += [(p, ("guards", i, "when", *loc)) for p, loc in guard.when.fact_paths()]
    cause = node.locates.cause
    if not isinstance(cause, str):
        refs.append((cause.fact, ("locates", "cause", "fact")))
    for name, op in node.change.items():
        if op.op == "set_from":
            refs.append((op.operand, ("change", name, "set_from")))
    for ref, loc in refs:
        problem = fact_path_problem(ref)
        if problem:
            raise RuleLoadError(
                path, line_of(root, loc), msg("rule_bad_fact", None, path=ref, problem=problem)
            )


def _check_ask(node: model.RuleNode, root: yaml.Node | None, path: Path) -> None:
    ask = node.ask
    if ask is None:
        return
    line = line_of(root, ("ask",))
    if ask.key in BUILTIN_QUESTIONS:
        if ask.text is not None or ask.answers is not None:
            raise RuleLoadError(path, line, msg("rule_builtin_question", None, question=ask.key))
    elif ask.text is None or not ask.answers:
        raise RuleLoadError(path, line, msg("rule_question_needs_text", None, question=ask.key))


def load_node(path: Path) -> _Checked:
    """Parse and validate one rule file on its own (cross-file checks are in ``validate_files``)."""
    from pydantic import ValidationError

    from oomdoctor.rules.model import RuleNode as NodeSchema

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise RuleLoadError(path, None, str(err)) from None
    data, root = _compose(path, text)
    if not isinstance(data, dict):
        raise RuleLoadError(path, 1, msg("rule_not_mapping", None))
    try:
        node = NodeSchema.model_validate(data)
    except ValidationError as err:
        line, detail = _pydantic_problem(dict(err.errors()[0]), root)
        raise RuleLoadError(path, line, detail) from None
    _check_fact_paths(node, root, path)
    _check_ask(node, root, path)
    _check_texts(node, root, path)
    for name in node.env:
        if not ENV_NAME.match(name):
            raise RuleLoadError(path, line_of(root, ("env",), key=name), msg("rule_bad_env", None, name=name))
    return _Checked(node=node, file=path, line=line_of(root, (), key="id") or 1, root=root)


@record(frozen=True)
class _Checked:
    """One file's pydantic-validated node, before the cross-file checks."""

    node: model.RuleNode
    file: Path
    line: int
    root: yaml.Node | None


def _cross_checks(loaded: list[_Checked]) -> None:
    seen: dict[str, _Checked] = {}
    for item in loaded:
        first = seen.get(item.node.id)
        if first is not None:
            raise RuleLoadError(
                item.file,
                item.line,
                msg("rule_duplicate_id", None, id=item.node.id, other=f"{first.file}:{first.line}"),
            )
        seen[item.node.id] = item
    questions: dict[str, tuple[tuple[str, ...], _Checked]] = {}
    for item in loaded:
        node, root = item.node, item.root
        for i, target in enumerate(node.next):
            if target not in seen or target == node.id:
                raise RuleLoadError(
                    item.file, line_of(root, ("next", i)), msg("rule_dangling_next", None, id=target)
                )
        if node.ask is not None and node.ask.answers:
            values = tuple(a.value for a in node.ask.answers)
            other = questions.get(node.ask.key)
            if other is not None and other[0] != values:
                raise RuleLoadError(
                    item.file,
                    line_of(root, ("ask",)),
                    msg("rule_question_conflict", None, question=node.ask.key, other=str(other[1].file)),
                )
            questions.setdefault(node.ask.key, (values, item))


def validate_files(files: list[Path]) -> tuple[list[LoadedNode], list[dict[str, Any]]]:
    """Validate every file (pydantic, then the cross-file checks): the nodes sorted by (rank, id), and each
    node's validated data, which ``compiled.py`` keeps so the next start can skip this."""
    checked = [load_node(p) for p in files]
    _cross_checks(checked)
    checked.sort(key=lambda n: (n.node.rank, n.node.id))
    dumps = [item.node.model_dump() for item in checked]
    loaded = [
        LoadedNode(node=nodes.build(nodes.RuleNode, dump), file=item.file, line=item.line, root=item.root)
        for item, dump in zip(checked, dumps, strict=True)
    ]
    return loaded, dumps


def _rule_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise RuleLoadError(folder, None, msg("rule_dir_missing", None))
    return sorted(p for p in folder.glob("*.yaml") if p.is_file())


def check_rules(directory: Path | str | None = None) -> RuleSet:
    """Validate a folder of rule files afresh, ignoring and not writing the cache (``oomdoctor rules check``)."""
    from oomdoctor.resources import rules_dir

    folder = Path(directory) if directory is not None else rules_dir()
    loaded, _ = validate_files(_rule_files(folder))
    return RuleSet(directory=folder, nodes=loaded)


_CACHE: dict[tuple[str, tuple[tuple[str, int, int], ...]], RuleSet] = {}


def load_rules(directory: Path | str | None = None) -> RuleSet:
    """Every ``*.yaml`` in ``directory`` (default: the bundled rules/), validated: from the user cache when
    the files are as they were validated last, else afresh (and then cached). In-process, reused until a
    file changes."""
    from oomdoctor.resources import rules_dir
    from oomdoctor.rules import compiled

    folder = Path(directory) if directory is not None else rules_dir()
    files = _rule_files(folder)
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    key = (str(folder.resolve()), stamp)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    digest = compiled.digest(files)
    loaded = compiled.load(folder, digest)
    if loaded is None:
        loaded, dumps = validate_files(files)
        compiled.save(digest, loaded, dumps)
    ruleset = RuleSet(directory=folder, nodes=loaded)
    _CACHE[key] = ruleset
    return ruleset
