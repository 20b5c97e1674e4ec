"""The bundle of facts a diagnosis reads, addressed by dotted paths such as ``config.cutoff_len``.

Readers return raw facts (``Readings``: what the files, the device and the user said). One pure step,
``rules.assemble.assemble``, settles what several of them speak to (the card's size, the world size, the
effective batch, the phase and its candidates) and returns a frozen ``Facts`` whose ``derived`` is a typed
``Derived``. Rules, the estimate's inputs, reports and the TUI read only that bundle.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from oomdoctor import records
from oomdoctor.estimate.types import Estimate
from oomdoctor.facts.types import ConfigFacts, DataFacts, GpuFacts, LogFacts, ModelFacts
from oomdoctor.records import field, record

if TYPE_CHECKING:
    from oomdoctor.estimate.calibrate import Calibration

_MISSING = object()
_EMPTY: Mapping[str, str] = MappingProxyType({})


def _frozen_map(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


@record(frozen=True)
class Readings:
    """What the readers returned and what the user typed, before anything is settled."""

    config: ConfigFacts | None = None
    log: LogFacts | None = None
    gpu: GpuFacts | None = None
    model: ModelFacts | None = None
    data: DataFacts | None = None
    # An estimate made elsewhere (a rule case's table); None: assemble estimates when the model allows it.
    estimate: Estimate | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    capacity_mib: float | None = None  # the card's memory as the user gave it (--gpu-mib)
    world_size: int | None = None  # processes as the user or the launcher gave them (--nproc_per_node)

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", _frozen_map(self.env))


def _fact(doc: str, default: Any = None) -> Any:
    """A derived fact's field, with what it means (``DERIVED_FACTS``, the loader's error texts)."""
    return field(default=default, metadata={"doc": doc})


@record(frozen=True)
class Derived:
    """Facts settled from several readings and the user's answers (``derived.<name>`` in rule files)."""

    oom: bool = _fact(
        "the run ran out of memory: the log says so (or ends inside a cut traceback), or there is no log "
        "(the user came with an OOM), or the user answered the phase",
        False,
    )
    phase: str = _fact(
        "where memory ran out: answers.phase, else the log's phase, else the one phase candidate the "
        "config's schedule keeps, else load when the weights never loaded, else unknown",
        "unknown",
    )
    phase_source: str = _fact(
        "answer / log / schedule (the log narrows it to evaluation or save, the config's eval/save schedule "
        "at that step picks one) / weights_loaded / config / logits_size (a frameless message whose request "
        "is this batch's logits) / log_stop (a log with no error line that stops before the first step, made an "
        "OOM by an answer) / weights_size (no log, and the weights alone on each card are more than the card) / "
        "weights_size_any_card (no log, no card size, and the weights alone are more than any card of the "
        "table, unsharded or over a stated world size) / run_kind (the user says the run only predicts or "
        "chats, and neither the config nor the log shows training) / none",
        "none",
    )
    phase_candidates: tuple[str, ...] = _fact(
        "the phases the log leaves open (a failure in the Trainer's after-step hook: eval, save) that the "
        "config's schedule can run at that step (all of them without a config); empty when the log narrows "
        "nothing",
        (),
    )
    weights_loaded: bool | None = _fact(
        "the weights finished loading: answers.weights_loaded, else the log (None: unknown)"
    )
    memory_kind: str | None = _fact(
        "gpu (the memory the training step computes in: the GPU's, or PyTorch's CPU allocator inside a "
        "step of a CPU-only run) or host (system RAM: Killed, mmap, MemoryError): answers.memory_kind, else "
        "the log; a traceback cut before its error line is a Python exception, read as the GPU's"
    )
    memory_kind_source: str | None = _fact(
        "answer / log / traceback (a cut traceback whose phase or frames can only mean the GPU) / assumed "
        "(a cut traceback while loading or saving: gpu is likely, the question stays open)"
    )
    capacity_mib: float | None = _fact(
        "the card's memory, the one every report and the estimate use: the user's --gpu-mib, else the "
        "log's total capacity (the card that ran out), else NVML's first GPU, else answers.card_gb"
    )
    capacity_source: str | None = _fact("flag / log / nvml / answer (None: unknown)")
    card_bf16: bool | None = _fact(
        "the training card computes in bf16: answers.card_bf16, else NVML's compute capability, else the "
        "card's name (NVML's or the log's) in the card table, else the run itself (a bf16 config whose log "
        "shows completed steps)"
    )
    card_name: str | None = _fact("the card's name from NVML, else from the log (None when unknown)")
    zero_stage: int | None = _fact(
        "the DeepSpeed ZeRO stage in use: the config's (its DeepSpeed JSON), else the log's (a traceback "
        "through ZeRO's stage files, its optimizer banner or config dump); None: not known to be on"
    )
    world_size: int | None = _fact(
        "processes taking part, from what states it: the user's count, the log's 'world size:', a "
        "launcher line (torchrun/deepspeed/accelerate arguments, WORLD_SIZE), Ray's ray_num_workers, the "
        "banner's Total train batch size / (batch x accumulation), WORLD_SIZE, answers.world_size; 1 for a "
        "config where nothing shows several processes; None when a rank or GPU number "
        "proves several but nothing says how many (never a rank number seen in an excerpt)"
    )
    world_size_source: str | None = _fact(
        "given / log / launcher / ray / banner / env / config / answer / single (None: unknown)"
    )
    processes_at_least: int | None = _fact(
        "a lower bound on the processes: world_size, or more when a process's number says so ([rank3]: "
        "four or more; an OOM on GPU 5: local rank 5, six or more); what 'several GPUs' conditions read"
    )
    sharded_by: str = _fact(
        "what spreads the model over the processes: deepspeed (a ZeRO stage, a DeepSpeed config or "
        "failure), fsdp (the config's fsdp, or FSDP frames in the traceback), ray (USE_RAY=1, or the config "
        "names its ray_* settings); none: nothing the readings show (plain data parallelism, one process)",
        "none",
    )
    finetuning_type: str | None = _fact(
        "what is trained: the config's finetuning_type when it names one; else full when the log shows it "
        "(trainable parameters are most of the model, or the optimizer step or the set-up creating the "
        "optimizer's state, log.setup_step optimizer_init, asked for more than adapters ever hold); else "
        "LLaMA-Factory's default (lora)"
    )
    micro_batch: int | None = _fact(
        "per-device train batch: the config's, else the log's 'Instantaneous batch size'"
    )
    accumulation: int | None = _fact("gradient accumulation steps: the config's, else the log's")
    effective_batch: int | None = _fact(
        "micro_batch x accumulation x world_size (the config's, with the settled world size; None while "
        "the world size is unknown), else the log's Total train batch size"
    )
    eval_batch: int | None = _fact(
        "per-device eval batch in effect (LLaMA-Factory's default 8 when unset; a benchmark run of "
        "`llamafactory-cli eval` (task:) uses batch_size instead)"
    )
    eval_batch_default: bool | None = _fact(
        "True when per_device_eval_batch_size is not in the config (the default 8 applies)"
    )
    self_listed_pid: int | None = _fact(
        "a 'Process N has X in use' entry that is the failing process itself (containers list it under "
        "its host pid); None when none matched"
    )
    other_process_mib: float | None = _fact(
        "memory that other processes held on the failing card (log lines, else NVML)"
    )
    other_process_share: float | None = _fact("other_process_mib / capacity_mib")
    other_process_pids: tuple[int, ...] = _fact("pids of those processes", ())
    model_size_mib: float | None = _fact(
        "the weights in 16-bit (the estimator's weights term, else parameters x 2 bytes)"
    )
    weights_share: float | None = _fact(
        "the weights' share of the card: model_size_mib / capacity, or, when it ran out while loading, "
        "what PyTorch had allocated by then (that is weights) / capacity, whichever is larger; None when "
        "neither is known"
    )
    host_ram_needed_mib: float | None = _fact(
        "model_size_mib x processes that each load it (processes_at_least)"
    )
    padded_longest_tokens: int | None = _fact(
        "the longest sample as it is padded in a batch: min(longest, cutoff_len) rounded up to 8"
    )
    cutoff_candidate: int | None = _fact(
        "a lower cutoff_len worth proposing, always below both the longest sample and cutoff_len: the 99th "
        "percentile length rounded up to 8 (keeps 99% of samples whole), else the longest multiple of 256 "
        "the estimate says fits the card; None without real lengths"
    )
    cutoff_candidate_source: str | None = _fact("p99 / estimate")
    cutoff_candidate_truncated: int | None = _fact(
        "samples cutoff_candidate would cut, when the lengths were counted at that cutoff (None: not counted)"
    )
    reserve_would_fit: bool | None = _fact(
        "the unused reserve is a real share of the card (facts/account.py) and, with what was free, would have "
        "served the request had it been in one piece: the memory was there, in pieces"
    )
    other_process_whose: str | None = _fact(
        "whose the memory outside this run is: stranger (another job), unclear (a listed process that may be "
        "this run's own: another rank, its vLLM engine, this notebook's kernel), own_ranks (the listed processes "
        "and this one make up the stated world size: this run's other ranks on the same card), None: none"
    )
    logits_evidence: str | None = _fact(
        "frame (a function over the full-vocabulary logits among the failure's innermost frames) / size (the "
        "request is micro-batch x padded length x vocabulary x 4 or 2 bytes, x2 for DPO/KTO pairs) / share (no "
        "vocabulary to size them by: a PPO/DPO/KTO step's single request of a third of the card or more) / None"
    )
    log_stop: str | None = _fact(
        "where a log that shows a run under way stops with no error line at all (rules/log_stop.py): load "
        "(weights loading or loaded, no step yet) / train (inside the training steps) / train_end (every step "
        "done, no end-of-training summary); None: the log has an error line, its own end, or shows no run"
    )
    log_stop_next: str | None = _fact(
        "save / eval: what the config's schedule runs right after the last step such a log shows (the likely "
        "place it stopped, asked, not asserted); None when nothing is scheduled there"
    )
    dominant_cause: str | None = _fact(
        "what the failing step's biggest term is: logits when logits_evidence says so, else the estimate's "
        "dominant term (logits / activations / weights / optimizer_state) when it is the same at every world "
        "size the run may have (ZeRO shards some terms by it); None when neither tells"
    )
    dominant_by_world: tuple[tuple[int, str], ...] = _fact(
        "(world size, the estimate's largest term there) at each world size tried, when ZeRO shards the state "
        "over an unstated number of processes and the largest term is not the same at all of them: what "
        "filled the card hangs on the world size (asked); empty when it does not",
        (),
    )
    weights_fill_step: bool = _fact(
        "in a training step, the weights are known to be what fills the card (they loaded and fit, so "
        "only then are they what to shrink there): their share of the card is at least 30 %, full "
        "fine-tuning (a gradient and Adam state per parameter), or, their share unknown, the failing frame "
        "gathers sharded parameters (ZeRO-3 all-gather, FSDP unshard); never while ZeRO-3 "
        "offloads them to the CPU, nor for a request no weight tensor can be (request_is_step_tensor)",
        False,
    )
    request_is_step_tensor: bool = _fact(
        "it ran out in a forward/backward (first_batch, long_sample) on a request larger than any single "
        "weight, gradient or Adam tensor of a model can be (8 GiB, an fp32 embedding of 256k x 8192): the "
        "step's activations or logits (loading and the optimizer step allocate flattened buffers that large)",
        False,
    )
    fixed_cause: str | None = _fact(
        "what the part of the run that no batch setting shrinks is, where it ran out: optimizer_state when "
        "every parameter is trained and it ran out in a step (a gradient and Adam's fp32 state per parameter, "
        "seven times the 16-bit weights) or at loading while the set-up creates the optimizer's partitions "
        "and states (log.setup_step optimizer_init), weights otherwise; None while the phase is unknown"
    )
    precision_stated: bool = _fact(
        "the config says how the run computes: it writes bf16, fp16 or pure_bf16, or it is a whole training "
        "config (model_name_or_path and dataset written), in which LLaMA-Factory runs fp32 without them; "
        "False for a fragment (a thread's few keys), whose missing precision is unknown, not fp32",
        False,
    )
    # --- derived facts added by the fix9b work ---
    resumes: bool | None = _fact(
        "the run resumes from a checkpoint: True when the config writes resume_from_checkpoint (a path, or "
        "true), else the user's answer to resumed; None when neither says (LLaMA-Factory may also resume on "
        "its own from a checkpoint in output_dir)"
    )
    liger_fuses_loss: bool | None = _fact(
        "LLaMA-Factory would let Liger fuse this run's loss (its stage is pt or sft: the estimate's "
        "liger_fused_loss_stages); False for dpo/kto/ppo/rm, whose trainer builds the full logits; None without "
        "a config"
    )
    creates_optimizer_state: bool = _fact(
        "it ran out where the optimizer's state is made or updated: the optimizer step, or the set-up that creates "
        "the optimizer's partitions and states at loading (log.setup_step optimizer_init)",
        False,
    )
    frames_seen: bool = _fact(
        "the log shows frames of the failure's traceback (False: no log, or only an error line without frames)",
        False,
    )
    run_kind: str | None = _fact(
        "train / predict / chat / export: what the run does: the config (export_dir written with no training "
        "key: export, llamafactory-cli export; evaluation_only: predict; do_train written "
        "true, or a key only a training uses, lf_defaults.yaml training_only_keys: train), else a log that shows "
        "training (its banner, steps, the Trainer's loop frames) or a resume (resumes: only a training "
        "resumes), else the user's answer to run_kind (chat: llamafactory-cli chat / webchat, the web UI's "
        "Chat tab); None when none says"
    )
    # --- derived facts added by the fix10b work ---
    world_size_open: bool = _fact(
        "the run shards its state over its processes (sharded_by: deepspeed, fsdp, ray) and nothing states "
        "how many there are (world_size_source unknown or single; a rank number only bounds it, "
        "processes_at_least): the one definition the world-size question, the terms by world size and the "
        "weights-beyond-every-card test read",
        False,
    )


# The phases of a forward/backward over a batch: where the batch settings (micro-batch, length) act.
BATCH_PHASES: frozenset[str] = frozenset({"first_batch", "long_sample"})


# name -> what it means (the loader rejects any other derived.<name> in a rule file).
DERIVED_FACTS: dict[str, str] = {f.name: f.metadata["doc"] for f in records.fields(Derived)}


@record(frozen=True)
class Facts:
    """One assembled bundle (build it with ``rules.assemble.assemble``). ``config`` carries the settled
    world size; ``estimate`` is the one made on the settled card and world size."""

    readings: Readings = field(default_factory=Readings, repr=False)
    config: ConfigFacts | None = None
    log: LogFacts | None = None
    gpu: GpuFacts | None = None
    model: ModelFacts | None = None
    data: DataFacts | None = None
    estimate: Estimate | None = None
    answers: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    derived: Derived = field(default_factory=Derived)

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", _frozen_map(self.answers))
        object.__setattr__(self, "env", _frozen_map(self.env))

    @property
    def capacity_mib(self) -> float | None:
        """The card's memory (``derived.capacity_mib``)."""
        return self.derived.capacity_mib

    def calibration(self) -> Calibration | None:
        """The calibration the estimate was made with, to estimate what-ifs of the same setting with it
        (None when it had none, the usual case: ``estimate/calibrate.py`` is then not imported)."""
        if self.estimate is None or not self.estimate.calibration:
            return None
        from oomdoctor.estimate.calibrate import calibration_of

        return calibration_of(self.estimate)

    def get(self, path: str) -> Any:
        """``"config.per_device_train_batch_size"`` -> its value; ``None`` when any part is unknown.

        Mapping members are looked up by key (``answers.phase``, ``env.PYTORCH_CUDA_ALLOC_CONF``,
        ``estimate.terms.logits_loss``), record members by attribute.
        """
        node: Any = self
        for part in path.split("."):
            if node is None:
                return None
            if isinstance(node, Mapping):
                node = node.get(part)
            else:
                node = getattr(node, part, _MISSING)
                if node is _MISSING:
                    raise KeyError(f"unknown fact path {path!r} (at {part!r})")
        return node

    def with_answers(self, answers: Mapping[str, str]) -> Facts:
        """The same readings assembled again with these answers added; the estimate and the costly cutoff
        search are reused while the answers leave the card's size and the world size as they were (an
        answer to the card size question sizes them anew: ``assemble`` then makes both again)."""
        from oomdoctor.rules.assemble import assemble

        return assemble(
            self.readings, {**self.answers, **answers}, reuse=self.derived, reuse_estimate=self.estimate
        )

    def with_data(self, data: DataFacts) -> Facts:
        """The same readings with measured lengths, assembled again (the estimate rebuilt on them)."""
        return self.with_readings(data=data, estimate=None)

    def with_readings(self, **changes: Any) -> Facts:
        """Other readings (``log=...``: a hypothetical failure, as ``watch`` foresees one), the same answers,
        assembled again. The readings' own estimate, if one was given, stays unless replaced."""
        from oomdoctor.rules.assemble import assemble

        return assemble(records.replace(self.readings, **changes), self.answers)
