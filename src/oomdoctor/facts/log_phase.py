"""When memory ran out: turns the scanner's snapshot and traceback into a phase, with the evidence.

Order of trust: the traceback's frames (what code was running), then the last marker the log printed
(what the run said it was doing), then the step counter (how far training had come). When none of them
tells, the answer is ``unknown`` and the rules engine asks the user; a guess made from the absence of
evidence (no progress line in a short excerpt) is marked ``low`` confidence.
"""

from __future__ import annotations

from functools import lru_cache

from oomdoctor.facts.log_gather import whole_model_gather
from oomdoctor.facts.log_scan import FILE_LINE, FRAGMENT_LINE, Failure, Run, Snapshot, match_frame_line
from oomdoctor.facts.log_tables import CodeRule, FrameRule, Tables
from oomdoctor.i18n import both
from oomdoctor.lazyre import lazy
from oomdoctor.records import field, record
from oomdoctor.text import Text

# IPython marks the running line of a frame "----> 1 trainer.train()" / "-> 1539 return inner_training_loop("
# among numbered context lines ("   1537     x = 1"), which are not what ran.
_IPYTHON_RUNNING = lazy(r"^\s*-*>\s*\d+\s(?P<code>.*)$")
_IPYTHON_CONTEXT = lazy(r"^\s+\d+\s")
_SKIP_LINE = lazy(
    r"^\s*(?:Traceback \(most recent call last\)|During handling of the above exception|The above exception was"
    r"|\[\s*\.\.\.\s*\]|\.\.\.|[\^~]+)\s*:?\s*$"
)
_ERROR_TYPE = lazy(r"^\s*((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception))\b")
TRAINING_PHASES = ("first_batch", "long_sample", "optimizer_step")


@record
class Frame:
    """One traceback frame: file, function and the source line shown."""

    path: str | None
    function: str | None
    code: str | None = None


@record
class PhaseResult:
    """The phase the failure happened in, how sure, and the lines that say so."""

    phase: str
    confidence: str  # "high" / "low"
    evidence: list[Text] = field(default_factory=list)
    step: int | None = None
    good_steps: int | None = None
    frames: list[Frame] = field(default_factory=list)
    kind: str | None = None  # the failure kind, refined by the library it was raised in
    error_type: str | None = None
    candidates: list[str] = field(default_factory=list)  # phases still possible when phase is "unknown"
    compute_role: str | None = None  # the role of the innermost compute frame (forward / loss / train ...)
    setup_step: str | None = None  # what a set-up before any step was allocating (LogFacts.setup_step)


def text(key: str, **fields: object) -> Text:
    """A catalogue entry in both languages; a field given in both languages is picked per language."""
    return both(key, **fields)


def parse_frames(block: list[str]) -> list[Frame]:
    """Frames of a traceback block, outermost first; a bare source line becomes a frame with code only."""
    frames: list[Frame] = []
    current: Frame | None = None
    ipython = False
    for line in block:
        if not line.strip() or _SKIP_LINE.match(line):
            continue
        m = match_frame_line(line)
        if m:
            groups = m.groupdict()
            func = groups.get("func")
            ipython = m.re is not FILE_LINE and m.re is not FRAGMENT_LINE
            # IPython names methods "Trainer.train": the function is the last part; a Windows path is read with
            # "/" so the tables' file parts match it ("~\envs\x\Lib\site-packages\datasets\arrow_dataset.py")
            path = groups.get("path")
            current = Frame(
                path.replace("\\", "/") if path else None, func.rsplit(".", 1)[-1] if func else None
            )
            frames.append(current)
            continue
        if ipython:
            running = _IPYTHON_RUNNING.match(line)
            if running and current is not None:
                current.code = running.group("code").strip()
                continue
            if _IPYTHON_CONTEXT.match(line):
                continue
        code = line.strip()
        if current is not None and current.code is None:
            current.code = code
        else:
            # a bare source line (a cut excerpt): when it calls a function over the logits, that is what ran
            current = Frame(None, _logits_call(code), code)
            frames.append(current)
    return frames


_CALL = lazy(r"([A-Za-z_]\w*)\(")


def _logits_call(code: str) -> str | None:
    """The function over the full-vocabulary logits a bare source line calls (``logits.log_softmax(-1)``)."""
    from oomdoctor.facts.logits import logits_frames

    if _NOT_A_CALL.match(code) or "](" in code:
        return None  # a definition, a numbered context line, a link to a frame: not what ran
    known = logits_frames()
    return next((name for name in reversed(_CALL.findall(code)) if name in known), None)


# the task Ray's memory monitor names: "where the task (actor ID: 65..., name=RewardModelRayActor.__init__, pid=5315"
_RAY_TASK = lazy(r"\bname=(?P<task>[A-Za-z_][\w.]*)")
_NOT_A_CALL = lazy(r"^(?:\d+\s|(?:async\s+)?def\s|class\s)")


@lru_cache(maxsize=1)
def step_forward_frames() -> frozenset[str]:
    """Forward frames that place a forward-only failure in the training step (log_markers.yaml)."""
    from oomdoctor.facts.log_tables import markers_raw

    return frozenset(markers_raw().get("step_forward_frames") or ())


def _message_cut(message: str) -> bool:
    """An OOM message that names its request but stops before the card's account (capacity, free)."""
    return "Tried to allocate" in message and not ("capacity" in message or " free" in message)


@lru_cache(maxsize=1)
def outer_loop_frames() -> frozenset[str]:
    """A trainer's outer loop functions, which allocate nothing themselves (log_markers.yaml)."""
    from oomdoctor.facts.log_tables import markers_raw

    return frozenset(markers_raw().get("outer_loop_frames") or ())


# "rollout": an RL trainer generating inside its training step (a `generate` below it is not an evaluation).
_ROLE_RANK = {"context": 5, "after_step": 4, "train": 3, "rollout": 3, "loss": 2, "forward": 1}
# What the Trainer does in its after-step hook: the phases a failure there can belong to.
AFTER_STEP_PHASES = ("eval", "save")


def _classify(frame: Frame, t: Tables) -> FrameRule | CodeRule | None:
    """The frame's role from its function (and file), or from its source line; the stronger one wins
    (a ``forward`` whose line calls ``loss_fct(`` is loss)."""
    by_function: FrameRule | CodeRule | None = None
    by_code: FrameRule | CodeRule | None = None
    if frame.function is not None:
        by_function = next((r for r in t.frames if r.matches(frame.function, frame.path)), None)
    if frame.code:
        by_code = next((r for r in t.code if any(c in frame.code for c in r.contains)), None)
    if by_function is None or (
        by_code is not None
        and (
            _ROLE_RANK[by_code.role] > _ROLE_RANK[by_function.role]
            or (isinstance(by_code, CodeRule) and by_code.over_frame)
        )
    ):
        return by_code
    return by_function


def _label(frame: Frame) -> str:
    if frame.function:
        return f"{frame.function}()"
    return f"`{(frame.code or '')[:80]}`"


def _library_kind(kind: str | None, frames: list[Frame], t: Tables) -> str | None:
    """A GPU OOM raised from DeepSpeed or bitsandbytes code is reported as that library's kind."""
    if kind not in ("cuda_oom", "cuda_error"):
        return kind
    for frame in reversed(frames):
        if frame.path is None or "/torch/" in frame.path:
            continue
        for library, files in t.library_kinds:
            if any(f in frame.path for f in files):
                return library
        break
    return kind


def _good_steps(snap: Snapshot, jsonl_steps: int | None) -> int | None:
    known = [n for n in (snap.train_steps, jsonl_steps) if n is not None]
    if known:
        return max(known)
    if snap.training_started and snap.loss_dicts == 0 and not snap.train_pct:
        return 0  # training had begun and no step is shown done (a cut bar's percentage shows some were)
    return None


_Hit = tuple[Frame, FrameRule | CodeRule]


@record
class _Hits:
    """The classified frames of a traceback: the innermost context frame, the innermost compute frame
    (train / loss / forward ...) and the innermost frame of each role."""

    context: _Hit | None = None
    compute: _Hit | None = None
    roles: dict[str, _Hit] = field(default_factory=dict)


def _frame_hits(frames: list[Frame], t: Tables) -> _Hits:
    hits = _Hits()
    for frame in reversed(frames):  # innermost first
        rule = _classify(frame, t)
        if rule is None:
            continue
        if rule.role == "context":
            hits.context = hits.context or (frame, rule)
        else:
            hits.compute = hits.compute or (frame, rule)
        hits.roles.setdefault(rule.role, (frame, rule))
    rollout = hits.roles.get("rollout")
    if (
        rollout is not None
        and hits.context is not None
        and hits.context[1].phase == "eval"
        and frames.index(rollout[0]) < frames.index(hits.context[0])
    ):
        hits.context = None  # the generation below an RL rollout is the rollout, part of the training step
    elif (
        rollout is not None
        and hits.context is not None
        and hits.context[1].phase == "load"
        and frames.index(rollout[0]) < frames.index(hits.context[0])
        and whole_model_gather([rollout[0]]) is not None
    ):
        # DeepSpeed's parameter code below a whole-model gather is that gather, not loading
        hits.context = None
    return hits


def decide(failure: Failure, run: Run, t: Tables, *, jsonl_steps: int | None = None) -> PhaseResult:
    """The phase of one failure."""
    return _Decision(failure, run, t, jsonl_steps).decide()


class _Decision:
    """One failure's phase, decided from its frames first, else from the log's last marker."""

    def __init__(self, failure: Failure, run: Run, t: Tables, jsonl_steps: int | None) -> None:
        self.failure, self.run, self.t = failure, run, t
        self.frames = parse_frames(failure.block)
        self.snap = failure.snapshot
        self.good = _good_steps(self.snap, jsonl_steps)
        # a bar whose count is cut off still shows steps done from 1 %
        self.any_steps = (self.good or 0) > 0 or self.snap.loss_dicts > 0 or (self.snap.train_pct or 0) >= 1
        self.res = PhaseResult(phase="unknown", confidence="low", frames=self.frames, good_steps=self.good)
        self.ev = self.res.evidence
        self.hits = _frame_hits(self.frames, t)

    def decide(self) -> PhaseResult:
        failure, res = self.failure, self.res
        res.kind = _library_kind(failure.kind, self.frames, self.t)
        if failure.line:
            m = _ERROR_TYPE.match(failure.line)
            res.error_type = m.group(1) if m else None
        if failure.cut:
            self.ev.append(text("log_ev_cut"))
        if failure.adopted_from is not None:
            self.ev.append(
                text("log_ev_sibling_frames", other=failure.adopted_from or "?", own=failure.key or "?")
            )
        res.compute_role = self.hits.compute[1].role if self.hits.compute is not None else None
        if not self._by_frames() and not self._by_frames_elsewhere() and not self._by_ray_task():
            self._by_marker()
        if failure.cut and not any(f.function for f in self.frames):
            res.confidence = "low"  # not even a frame: only the log's state at the cut tells where
        self._set_step()
        return res

    # ------------------------------------------------------------------ evidence
    def _set(self, phase: str, confidence: str) -> None:
        self.res.phase, self.res.confidence = phase, confidence

    def _frame_evidence(self, hit: _Hit) -> None:
        self.ev.append(text("log_ev_frame", frame=_label(hit[0]), why=hit[1].why))

    def _marker_evidence(self) -> None:
        snap = self.snap
        if snap.context_line:
            why = snap.context_why or text(f"log_ctx_{snap.context}")
            self.ev.append(text("log_ev_marker", line=snap.context_line[:120], why=why))

    def _bar_finished(self) -> bool:
        """The last training bar before the failure had reached its total (100 %)."""
        snap, total = self.snap, self.run.train_total
        if snap.train_steps is None and snap.train_pct is not None:
            return snap.train_pct >= 100
        return bool(
            snap.train_steps and total and snap.train_steps >= total and not snap.train_steps_estimated
        )

    def _training(self, *, step_frames: bool = False) -> None:
        snap, good, ev = self.snap, self.good, self.ev
        if self.any_steps and not step_frames and self._bar_finished():
            # a bar at 100 % is the end of an epoch (or of training), not a step that met a long sample; with
            # no frame of a step, what ran next (a save, an evaluation, the next epoch's or rollout's set-up) is
            # not in the log
            self._set("unknown", "low")
            ev.append(text("log_ev_bar_finished", bar=snap.train_bar or ""))
            return
        if self.any_steps and good is not None and 0 < good <= self.t.early_steps:
            # the first update allocates the optimizer state; a script's counter may count micro-batches:
            # so few steps cannot tell the first full step from a longer batch
            self._set("unknown", "low")
            self.res.candidates = ["first_batch", "long_sample"]
            ev.append(text("log_ev_early_steps", n=good, bar=snap.train_bar or ""))
            return
        if self.any_steps:
            self._set("long_sample", "high")
            if good and snap.train_steps_estimated and good == snap.train_steps:
                self.res.confidence = "low"
                ev.append(text("log_ev_steps_estimated", n=good, bar=snap.train_bar))
            elif good:
                ev.append(text("log_ev_steps", n=good, bar=snap.train_bar or "trainer_log.jsonl"))
            elif snap.loss_dicts:
                ev.append(text("log_ev_loss_dicts", n=snap.loss_dicts))
            else:
                # only the percentage of a cut bar: steps had completed, how many is not shown
                self.res.confidence = "low"
                ev.append(text("log_ev_bar_percent", pct=snap.train_pct, bar=snap.train_bar or ""))
            if snap.bar_after_failure:
                ev.append(text("log_ev_bar_after_failure"))
        elif snap.training_started:
            self._set("first_batch", "high")
            ev.append(text("log_ev_no_step", bar=snap.train_bar or "***** Running training *****"))
        elif snap.elided and self.failure.cut:
            # no error line and lines left out before it: nothing says how far training had come
            self._set("unknown", "low")
            ev.append(text("log_ev_elided_steps"))
        else:
            self._set("first_batch", "low")
            ev.append(text("log_ev_no_step_info"))

    # ------------------------------------------------------------------ from the frames
    def _by_frames(self) -> bool:
        """The phase the traceback's frames tell; False when they tell nothing."""
        hits, roles = self.hits, self.hits.roles
        after_step = roles.get("after_step")
        if hits.context is not None:
            self._set(str(hits.context[1].phase), "high")
            self.res.setup_step = hits.context[1].setup_step
            self._frame_evidence(hits.context)
        elif after_step is not None:
            self._after_step(after_step)
        elif "train" in roles or "rollout" in roles or ("loss" in roles and self.snap.context != "eval"):
            self._training_frames()
        elif "loss" in roles or "forward" in roles:
            self._compute_frames()
        else:
            return False
        return True

    def _by_frames_elsewhere(self) -> bool:
        """When the failure's own frames tell nothing: the frames its process printed right after the error
        line (another writer's lines cut its traceback in two), else the traceback of another rank that the log
        ends in (the ranks of one run run the same code). False when they tell nothing either."""
        failure = self.failure
        sources = [
            (failure.trailing, text("log_ev_frames_after_error")),
            (
                failure.sibling_block,
                text("log_ev_sibling_cut_frames", other=failure.sibling_key or "?", own=failure.key or "?"),
            ),
        ]
        for lines, why in sources:
            frames = parse_frames(lines) if lines else []
            hits = _frame_hits(frames, self.t)
            if hits.context is None and hits.compute is None:
                continue
            self.frames, self.hits = self.frames + frames, _frame_hits(self.frames + frames, self.t)
            self.res.frames = self.frames
            self.ev.append(why)
            return self._by_frames()
        return False

    def _by_ray_task(self) -> bool:
        """A Ray memory-monitor kill names the task it killed ("name=RewardModelRayActor.__init__"): the phase
        of that method where the tables know it. False otherwise."""
        failure = self.failure
        if failure.ran_out_of != "host" or "name=" not in failure.message:
            return False
        m = _RAY_TASK.search(failure.message)
        if m is None:
            return False
        method = m.group("task").rsplit(".", 1)[-1]
        for pattern, phase, why in self.t.ray_task_phases:
            if pattern.search(method):
                self._set(phase, "high")
                self.ev.append(text("log_ev_ray_task", task=m.group("task"), why=why))
                return True
        return False

    def _after_step(self, after_step: _Hit) -> None:
        compute = self.hits.compute
        if (
            compute is not None
            and compute[0] is not after_step[0]
            and compute[1].role in ("loss", "forward")
            and self.frames.index(compute[0]) > self.frames.index(after_step[0])
        ):
            # a model forward below the after-step hook: the Trainer only evaluates there
            self._set("eval", "high")
            self._frame_evidence(compute)
            self._frame_evidence(after_step)
            return
        self._set("unknown", "low")
        self.res.candidates = list(AFTER_STEP_PHASES)
        self._frame_evidence(after_step)
        self.ev.append(text("log_ev_after_step", n=self.good if self.good is not None else "?"))

    def _training_frames(self) -> None:
        roles, compute = self.hits.roles, self.hits.compute
        rollout = roles.get("rollout")
        deciding = roles.get("train") or rollout or roles["loss"]
        if self._stops_at_the_loop(deciding):
            return
        if compute is not None and compute[0] is not deciding[0]:
            self._frame_evidence(compute)  # what was allocating
        if (
            rollout is not None
            and rollout[0] is not deciding[0]
            and (compute is None or rollout[0] is not compute[0])
        ):
            self._frame_evidence(rollout)  # an RL rollout: what it holds is the likely cause
        self._frame_evidence(deciding)  # why it is training
        self._training(step_frames=True)

    def _stops_at_the_loop(self, deciding: _Hit) -> bool:
        """A fragment pasted, not a log: the OOM message cut before the card's account (or no error line at all)
        and a traceback whose innermost frame is the training loop itself (``Trainer.train``), which allocates
        nothing, so the frames below it were cut too. That no progress line precedes it then says nothing about
        how far training had come: the phase is unknown (asked), not the first batch."""
        innermost = next((f for f in reversed(self.frames) if f.function), None)
        loop = outer_loop_frames()
        if innermost is None or innermost is not deciding[0] or innermost.function not in loop:
            return False
        if innermost.code and any(name not in loop for name in _CALL.findall(innermost.code)):
            return False  # its running line calls into the step (``self.training_step(...)``): not cut at the loop
        if self.any_steps or self.snap.training_started or self.snap.context is not None:
            return False
        if not (self.failure.cut or _message_cut(self.failure.message)):
            return False
        self._set("unknown", "low")
        self._frame_evidence(deciding)
        self.ev.append(text("log_ev_stops_at_loop", frame=_label(innermost)))
        return True

    def _compute_frames(self) -> None:
        roles, snap, run = self.hits.roles, self.snap, self.run
        self._frame_evidence(self.hits.compute or roles.get("loss") or roles["forward"])
        if snap.context == "eval":
            self._set("eval", "high")
            self._marker_evidence()
        elif snap.context in ("train", "zero_init") or snap.training_started or self.any_steps:
            self._training()
        elif run.setup_seen:
            self.ev.append(text("log_ev_setup", line=(run.setup_line or "")[:120], why=run.setup_why or {}))
            self._training()
        elif self._gather_or_attention():
            # a ZeRO-3 / FSDP gather or the attention kernel inside a forward, and no evaluation or generation
            # anywhere in the log: a fine-tuning run's forward is its training step
            self.ev.append(text("log_ev_forward_is_step"))
            self._training()
        else:
            self.ev.append(text("log_ev_forward_only"))

    def _gather_or_attention(self) -> bool:
        """A training-step forward frame (``step_forward_frames`` in the markers) among the frames or called on
        the failure's source lines."""
        known = step_forward_frames()
        names = [f.function for f in self.frames] + [
            name
            for f in self.frames
            if f.code and not _NOT_A_CALL.match(f.code)
            for name in _CALL.findall(f.code)
        ]
        return any(name in known for name in names)

    # ------------------------------------------------------------------ from the log's last marker
    def _by_marker(self) -> None:
        ctx, snap, ev, good = self.snap.context, self.snap, self.ev, self.good
        if ctx == "load" and self.any_steps and not self.failure.cut and not snap.context_in_step:
            # a loading marker after completed steps: the evidence disagrees, so ask rather than guess
            self._marker_evidence()
            ev.append(text("log_ev_conflict_load_steps", n=good if good is not None else snap.loss_dicts))
        elif ctx in ("load", "eval", "save"):
            self._set(str(ctx), "high")
            self._marker_evidence()
        elif ctx is None and self.failure.kind == "mmap" and not snap.training_started:
            # mapping a library (an import) or a weights file into memory: the start of the run, loading
            self._set("load", "high")
            ev.append(text("log_ev_mmap_at_start"))
        elif ctx == "after_load" and snap.export and not self.any_steps and not snap.training_started:
            # an export with its model loaded: what it does next is the merge or quantization and the write
            self._set("save", "high")
            self._marker_evidence()
            ev.append(text("log_ev_export_after_load"))
        elif ctx == "after_load" and not self.any_steps and not snap.training_started:
            # the model had finished loading and nothing later says what ran: not the load; asked
            self._marker_evidence()
            ev.append(text("log_ev_after_load"))
        elif ctx == "zero_init":
            # DeepSpeed building its ZeRO optimizer: set-up before any step (issue 8 item 4), not an update
            self._set("load", "high")
            self.res.setup_step = "optimizer_init"
            self._marker_evidence()
        elif ctx == "after_train":
            # the latest marker wins: the end-of-training summary came after the last loss line
            self._after_train()
        elif ctx == "train" or snap.training_started:
            self._training_marker()
        elif not self.failure.cut:
            ev.append(text("log_ev_nothing"))

    def _after_train(self) -> None:
        """Training had finished (``train_runtime``, "Training completed") and nothing later says what ran:
        what a training script runs next is the final save of the model (a final evaluation or prediction
        prints its own marker, which would be the latest). Low confidence: it is inferred from the order."""
        self._marker_evidence()
        if self.failure.cut:
            self.ev.append(text("log_ev_after_train"))
            return
        self._set("save", "low")
        self.ev.append(text("log_ev_after_train_save"))

    def _training_marker(self) -> None:
        good = self.good
        if self.res.kind != "killed":
            self._marker_evidence()
            self._training()
            return
        multiple = next((k for k in self.t.save_step_multiples if good and good % k == 0), None)
        if multiple is not None:
            self._set("save", "low")
            self.ev.append(text("log_ev_killed_save", n=good, k=multiple))
        else:
            self.ev.append(text("log_ev_killed_training", n=good if good is not None else "?"))

    def _set_step(self) -> None:
        res, good = self.res, self.good
        if res.phase in TRAINING_PHASES:
            res.step = good + 1 if good is not None else (1 if res.phase == "first_batch" else None)
        elif res.phase in ("eval", "save") or res.candidates:
            res.step = good
        elif res.phase == "unknown" and self.snap.context == "train" and good is not None:
            res.step = good + 1
