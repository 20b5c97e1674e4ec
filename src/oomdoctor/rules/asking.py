"""What to ask when the files cannot tell: only what could change the proposal, one tier at a time, the
most decisive first; and the check that the user's answers are ones the questions allow."""

from __future__ import annotations

import itertools

from oomdoctor.diagnosis import Answer, Question
from oomdoctor.errors import BadInput
from oomdoctor.i18n import msg
from oomdoctor.rules.facts import Facts
from oomdoctor.rules.loader import LoadedNode, RuleSet
from oomdoctor.rules.questions import BUILTIN_QUESTIONS, builtin_question, offered, said_no_oom, tried
from oomdoctor.rules.walk import Walk, top_rule, walk_rules

# Questions go out one tier at a time, the most decisive first: which memory ran out (the GPU's or the
# host's: a host-RAM failure has its own changes in every phase, so nothing GPU-side is proposed before it)
# and where it ran out (which nodes apply at all) come together, each worth asking only with the other's
# answer tried too (and beside them, where the phase is open and nothing says it, whether the run trained or
# only predicted or chatted: RUN_KIND); whether the weights loaded picks the branch; card facts and the nodes' own questions only
# choose within it. The nodes' own questions that name a cause come before the card facts (CAUSE_TIER); the
# others join the last tier.
QUESTION_TIERS: tuple[tuple[str, ...], ...] = (
    ("memory_kind", "phase", "run_kind"),
    ("weights_loaded",),
    ("card_gb", "world_size"),
    ("card_bf16",),
)
# Whether the run trained or only predicted (a node's own question, rules/load.predict_copies_per_gpu.yaml): asked
# beside the phase where nothing says it, since a run that only generates runs out where it evaluates.
RUN_KIND = "run_kind"
# A node's own question whose answer names the cause (its node locates one fixed cause: "did it resume?" is the
# optimizer state, "is that process yours?" another process) comes before the card's size and the world size,
# which only weigh the candidates: the size is asked after it, where it still changes the proposal.
CAUSE_TIER = 2
# The run's size (the card's memory, a sharded run's world size) is asked in its own tier, once where and which
# memory are answered, and never tried beside another question, nor another beside it: their nine and seven
# answers would multiply every other question's what-ifs, and a size is worth asking only for what it changes
# itself.
NEVER_BESIDE: frozenset[str] = frozenset({"card_gb", "world_size"})

# An answer to the key settles these facts too (a phase past loading means the weights loaded; a run that
# resumed from a checkpoint is a training, derived.run_kind).
SETTLED_BY: dict[str, tuple[str, ...]] = {"phase": ("weights_loaded",), "resumed": ("run_kind",)}


def oom_line_shown(facts: Facts) -> bool:
    """A line of the log shows an OOM: then "it did not run out of memory" is no answer to the memory kind."""
    return facts.log is not None and facts.log.oom


def check_answers(facts: Facts, rules: RuleSet) -> None:
    """Unknown question or value -> BadInput naming what is allowed; ``memory_kind=none`` beside an OOM line too
    (it is offered only where no line shows one)."""
    answers = facts.answers
    if said_no_oom(answers) and oom_line_shown(facts):
        raise BadInput(msg("no_oom_beside_oom_line", None))
    for key, value in answers.items():
        spec = rules.questions.get(key)
        if spec is None:
            raise BadInput(
                msg("unknown_question", None, question=key, allowed=", ".join(sorted(rules.questions)))
            )
        if value not in spec.allowed:
            raise BadInput(msg("bad_answer", None, key=key, value=value, allowed=", ".join(spec.allowed)))


def _run_kind_beside_phase(facts: Facts, rules: RuleSet, open_keys: list[str]) -> LoadedNode | None:
    """The node that asks whether the run trained or only predicted (a chat, the web UI's chat, do_predict),
    where that is asked beside the phase: the phase is open, neither the config nor the log says what the run
    does (``derived.run_kind``), and the log shows no frames (a bare message): a run that only generates runs
    out in evaluation, not in a step."""
    d = facts.derived
    if "phase" not in open_keys or d.run_kind is not None or RUN_KIND in facts.answers or d.frames_seen:
        return None
    return next((n for n in rules if n.node.ask is not None and n.node.ask.key == RUN_KIND), None)


def names_a_cause(loaded: LoadedNode) -> bool:
    """The node names one fixed cause (not one read from a fact, not unknown): an answer to its question that
    makes it match says what filled the memory."""
    cause = loaded.node.locates.cause
    return isinstance(cause, str) and cause != "unknown"


def _question_for(loaded: LoadedNode) -> Question:
    node = loaded.node
    assert node.ask is not None
    if node.ask.key in BUILTIN_QUESTIONS:
        return builtin_question(node.ask.key, node.id)
    assert node.ask.text is not None and node.ask.answers is not None
    return Question(
        key=node.ask.key,
        text=node.ask.text,
        answers=[Answer(value=a.value, label=a.label) for a in node.ask.answers],
        asked_by=node.id,
    )


def _builtin_question(facts: Facts, key: str, asked_by: str) -> Question:
    """The built-in question ``key``, its world sizes only those a rank number seen leaves possible."""
    return builtin_question(
        key, asked_by, at_least=facts.derived.processes_at_least, oom_seen=oom_line_shown(facts)
    )


def world_size_question_for(facts: Facts, questions: list[Question]) -> list[Question]:
    """The world size asked beside the others where what filled the card hangs on it (``dominant_by_world``)
    and the usual what-ifs did not ask it (the proposal may be the same at every size; the cause is not)."""
    if not facts.derived.dominant_by_world or "world_size" in facts.answers:
        return questions
    if any(q.key == "world_size" for q in questions):
        return questions
    question = _builtin_question(facts, "world_size", "engine")
    return [*questions, question] if question.answers else questions  # a rank past 64: nothing to offer


def _open_builtin_keys(facts: Facts) -> list[str]:
    """Built-in questions whose fact is still open: unknown, or only assumed (memory_kind of a cut traceback
    while loading or saving)."""
    d, answered = facts.derived, facts.answers
    open_keys = []
    if d.phase == "unknown":
        open_keys.append("phase")
    if d.weights_loaded is None:
        open_keys.append("weights_loaded")
    if d.memory_kind is None or d.memory_kind_source == "assumed":
        open_keys.append("memory_kind")
    if d.card_bf16 is None:
        open_keys.append("card_bf16")
    if d.capacity_mib is None:
        open_keys.append("card_gb")  # no flag, no total capacity in the log, no NVML
    if d.world_size_open:
        open_keys.append("world_size")
    return [key for key in open_keys if key not in answered]


class _Walks:
    """The walks of one choose_questions call, one per set of extra answers: the same answers (in any order)
    come up under several questions and contexts, and a walk depends on nothing else. Where only the top rule
    is wanted, the walk stops at it (walk.top_rule)."""

    def __init__(self, facts: Facts, rules: RuleSet, walk: Walk) -> None:
        self._facts, self._rules = facts, rules
        self.facts = facts
        self._seen: dict[frozenset[tuple[str, str]], Walk] = {frozenset(): walk}
        self._tops: dict[frozenset[tuple[str, str]], str | None] = {}

    def walk(self, answers: dict[str, str]) -> Walk:
        """The walk if the user also gave ``answers``."""
        key = frozenset(answers.items())
        found = self._seen.get(key)
        if found is None:
            found = walk_rules(self._facts.with_answers(answers), self._rules, with_effect=False)
            self._seen[key] = found
        return found

    def top(self, answers: dict[str, str]) -> str | None:
        """The rule proposed if the user also gave ``answers``."""
        key = frozenset(answers.items())
        if key in self._seen:
            return self._seen[key].top
        if key not in self._tops:
            self._tops[key] = top_rule(self._facts.with_answers(answers), self._rules)
        return self._tops[key]


def choose_questions(facts: Facts, rules: RuleSet, walk: Walk) -> list[Question]:
    """Ask only what could change the proposal, one tier at a time, most decisive first (QUESTION_TIERS):
    a question none of whose answers changes the proposed rule is noise, and so is a card question while the
    phase is still open (the next diagnosis, with the phase answered, asks it if it still matters)."""
    node_asks: dict[str, LoadedNode] = {}
    for loaded in walk.undecided:
        key = loaded.node.ask.key if loaded.node.ask is not None else None
        if key is not None and key not in BUILTIN_QUESTIONS and key not in facts.answers:
            node_asks.setdefault(key, loaded)
    open_keys = _open_builtin_keys(facts)
    beside_phase = _run_kind_beside_phase(facts, rules, open_keys)
    if beside_phase is not None:
        open_keys.append(RUN_KIND)
        node_asks[RUN_KIND] = beside_phase
    tiers = [[key for key in tier if key in open_keys] for tier in QUESTION_TIERS]
    naming = [key for key, loaded in node_asks.items() if names_a_cause(loaded) and key not in tiers[0]]
    tiers.insert(CAUSE_TIER, naming)
    tiers[-1] += [key for key in node_asks if key not in naming and key not in tiers[0]]
    walks = _Walks(facts, rules, walk)
    for index, tier in enumerate(tiers):
        later = [key for rest in tiers[index + 1 :] for key in rest]
        asked = []
        for key in tier:
            beside = [k for k in tier if k != key] + later  # the tier's other questions are answered too
            # a size is tried alone (its own answers against the proposal as it stands) and beside nothing
            beside = [] if key in NEVER_BESIDE else [k for k in beside if k not in NEVER_BESIDE]
            context_keys = [k for k in beside if k not in SETTLED_BY.get(key, ())]
            brings = _answer_that_changes(key, rules, context_keys, walks)
            if brings is None:
                continue
            if key in node_asks:
                asked.append(_question_for(node_asks[key]))
            else:
                asked.append(_builtin_question(facts, key, brings or "engine"))
        if asked:
            return asked
    return _phase_beside(rules, walk, open_keys, walks)


def _phase_beside(rules: RuleSet, walk: Walk, open_keys: list[str], walks: _Walks) -> list[Question]:
    """The phase, when no answer changes the proposal but one changes its alternatives: a change that frees
    memory outside the run (stop the other job) is the first step wherever it ran out, and what to change in
    the run if that cannot be done depends on where it ran out."""
    if "phase" not in open_keys or not walk.candidates:
        return []
    current = _alternative(walk)
    for value in rules.questions["phase"].allowed:
        if _alternative(walks.walk({"phase": value})) != current:
            return [builtin_question("phase", walk.candidates[0][1].rule)]
    return []


def _alternative(walk: Walk) -> str | None:
    return walk.candidates[1][1].rule if len(walk.candidates) > 1 else None


def _answer_that_changes(key: str, rules: RuleSet, context_keys: list[str], walks: _Walks) -> str | None:
    """The rule some answer to ``key`` would propose instead ("" when that answer leaves no proposal), or None
    when no answer changes the proposal. The later questions' answers are tried too (each combination), so
    the phase is worth asking even when a proposal also needs the memory kind, which is asked next."""
    contexts: list[dict[str, str]] = [{}]
    if context_keys:
        choices = [tried(k, rules.questions[k].allowed) for k in context_keys]
        contexts += [dict(zip(context_keys, combo, strict=True)) for combo in itertools.product(*choices)]
    values = rules.questions[key].allowed
    if key in BUILTIN_QUESTIONS:
        values = tried(key, offered(key, walks.facts.derived.processes_at_least))
    for context in contexts:
        base = walks.top(context)
        for value in values:
            top = walks.top({**context, key: value})
            if top != base:
                return top or ""
    return None
