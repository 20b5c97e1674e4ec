"""The OOM message read as an account of the whole card: whose memory it was when the request failed.

PyTorch's message states the card's capacity, what is free, and what its own allocator holds (allocated +
reserved-but-unused). The current format also lists the processes NVML sees on the card: the failing
process as "Including non-PyTorch memory, this process has P memory in use" when NVML gives its pid, and
every other pid as "Process N has Z memory in use". In a container (a notebook kernel, a cloud job) NVML
reports host pids, so the failing process itself appears as "Process N". The old format
("(GPU 0; X total capacity; A already allocated; Y free; R reserved in total by PyTorch)") lists no
processes, but capacity - free - reserved is what the card holds outside this process's reserve.

    card = this run (PyTorch allocated + reserved-unused + its other non-PyTorch memory)
           + other processes + free

Pure: numbers in (MiB, from ``LogFacts``), an ``Account`` out. No I/O.
"""

from __future__ import annotations

from typing import Literal

from oomdoctor.facts.types import LogFacts
from oomdoctor.records import field, record
from oomdoctor.report import units
from oomdoctor.text import Text

# A CUDA context with cuBLAS/cuDNN workspaces: about 0.3-1 GiB; NCCL buffers add to it on multi-GPU jobs.
CUDA_CONTEXT_MAX_MIB = 1536.0
# The numbers are taken a moment apart and rounded to two digits of GiB: sums agree within this share.
SLACK_SHARE = 0.02
SLACK_MIN_MIB = 64.0
# A listed process of about this run's size, in a run of several ranks: possibly a sibling rank placed on
# the same card (a device mapping problem of this run, not another job).
SIBLING_SIZE_RATIO = 0.5

# Beyond a CUDA context, memory outside this run's reserve counts as another job's from this size on.
STRANGER_MIN_MIB = 1024.0
STRANGER_MIN_SHARE = 0.05

# "0 bytes" for a process: NVML could not read per-process use (a container without the host's pid view, some
# vGPU and MIG set-ups), not a process that holds nothing; every process it lists then shows 0.
UNMEASURED_MIB = 0.0

Whose = Literal["this_run", "context", "stranger", "unclear", "unmeasured", "own_rank"]


@record(frozen=True)
class Listed:
    """A "Process N has Z memory in use" entry and whose it is."""

    pid: int
    mib: float
    whose: Whose


@record(frozen=True)
class Account:
    """Where the card's memory was when the allocation failed, as the OOM message accounts for it."""

    capacity_mib: float
    free_mib: float
    allocated_mib: float | None  # PyTorch's live tensors
    reserved_unused_mib: float | None  # reserved by PyTorch's cache, no tensor in it
    this_run_mib: float | None  # the failing process as a whole (None: only its reserve is known)
    # "message" (this process has ...) / "listed" (its own "Process N") / "reserve" (only a lower bound)
    this_run_source: str
    self_pid: int | None  # the "Process N" that is this run, when it is listed under its host pid
    listed: tuple[Listed, ...] = field(default_factory=tuple)  # the other listed processes
    requested_mib: float | None = None
    old_format: bool = False  # no process accounting in the message (PyTorch < 2.1)

    @property
    def reserved_mib(self) -> float | None:
        if self.allocated_mib is None:
            return None
        return self.allocated_mib + (self.reserved_unused_mib or 0.0)

    @property
    def non_pytorch_mib(self) -> float | None:
        """This process's memory outside PyTorch's reserve: CUDA context, NCCL, cuBLAS, other libraries."""
        reserved = self.reserved_mib
        if self.this_run_mib is None or reserved is None:
            return None
        return max(0.0, self.this_run_mib - reserved)

    @property
    def listed_mib(self) -> float:
        return sum(p.mib for p in self.listed)

    @property
    def outside_mib(self) -> float | None:
        """What the card holds outside this run: capacity - free - this run (its reserve when that is all
        that is known). Includes this run's CUDA context in the old format."""
        own = self.this_run_mib if self.this_run_mib is not None else self.reserved_mib
        if own is None:
            return None
        outside = max(0.0, self.capacity_mib - self.free_mib - own)
        return outside if outside >= SLACK_MIN_MIB or self.listed else 0.0  # rounding of the GiB figures

    @property
    def unlisted_mib(self) -> float | None:
        """In use on the card but in no listed process and not this run's known use."""
        outside = self.outside_mib
        return None if outside is None else max(0.0, outside - self.listed_mib)

    @property
    def own_ranks(self) -> tuple[Listed, ...]:
        return tuple(p for p in self.listed if p.whose == "own_rank")

    @property
    def unmeasured(self) -> tuple[Listed, ...]:
        return tuple(p for p in self.listed if p.whose == "unmeasured")

    @property
    def held_by_unmeasured_mib(self) -> float:
        """What processes listed with "0 bytes" hold between them, as far as the sum shows it: the memory
        outside this run's reserve and every measured listed process, beyond a CUDA context of its own."""
        unlisted = self.unlisted_mib
        if not self.unmeasured or unlisted is None:
            return 0.0
        return max(0.0, unlisted - CUDA_CONTEXT_MAX_MIB)

    @property
    def stranger_mib(self) -> float:
        """Memory that other jobs hold, as far as the message shows it: listed strangers, and (when nothing
        else accounts for it) what lies outside this run's reserve beyond a CUDA context."""
        mib = sum(p.mib for p in self.listed if p.whose == "stranger")
        unlisted = self.unlisted_mib
        if self.this_run_mib is None and not self.listed and unlisted is not None:
            beyond = unlisted - CUDA_CONTEXT_MAX_MIB
            if beyond >= max(STRANGER_MIN_MIB, STRANGER_MIN_SHARE * self.capacity_mib):
                mib += beyond
        return mib

    @property
    def unclear(self) -> tuple[Listed, ...]:
        return tuple(p for p in self.listed if p.whose == "unclear")


def _slack(capacity: float) -> float:
    return max(SLACK_MIN_MIB, SLACK_SHARE * capacity)


# The least a process that has touched the card holds: its CUDA context.
CUDA_CONTEXT_MIN_MIB = 250.0


def _no_room_beside(log: LogFacts) -> int | None:
    """The message lists processes that account for everything in use on the card: this run (which holds at
    least a CUDA context) has no room beside them, so the largest listed one is this run itself."""
    listed = log.other_processes
    if not listed or log.capacity_mib is None or log.free_mib is None:
        return None
    in_use = log.capacity_mib - log.free_mib
    if in_use - sum(p.used_mib for p in listed) >= CUDA_CONTEXT_MIN_MIB:
        return None
    return max(range(len(listed)), key=lambda i: listed[i].used_mib)


def _own_listed(log: LogFacts, reserved: float | None) -> int | None:
    """Index of the listed process that is this run itself (containers list it under its host pid)."""
    if log.process_in_use_mib is not None:
        return None
    if reserved is None:
        return _no_room_beside(log)  # the message was cut before PyTorch's own figures
    listed = log.other_processes
    near = [
        i for i, p in enumerate(listed) if reserved - 1.0 <= p.used_mib <= reserved + CUDA_CONTEXT_MAX_MIB
    ]
    if not near and log.capacity_mib is not None and log.free_mib is not None:
        # the card's memory in use cannot hold this run's reserve AND a listed process that large: that one
        # includes this run (a big non-PyTorch share: NCCL buffers, a vLLM engine in the same process)
        in_use = log.capacity_mib - log.free_mib
        slack = _slack(log.capacity_mib)
        near = [
            i
            for i, p in enumerate(listed)
            if p.used_mib >= reserved - 1.0 and reserved + p.used_mib > in_use + slack
        ]
    if not near:
        return _no_room_beside(log)
    return min(near, key=lambda i: abs(listed[i].used_mib - reserved))


def _as_own_ranks(listed: tuple[Listed, ...], world_size: int | None) -> tuple[Listed, ...]:
    """Processes beside this run that hold more than a CUDA context and, with it, make up exactly the run's
    stated world size: its other ranks, placed on the same card (a device-mapping fault of this run)."""
    big = [p for p in listed if p.whose in ("unclear", "stranger")]
    if world_size is None or world_size < 2 or len(big) + 1 != world_size:
        return listed
    return tuple(Listed(p.pid, p.mib, "own_rank") if p in big else p for p in listed)


def _unmeasured_listing(log: LogFacts) -> bool:
    """The message lists processes with "0 bytes" (NVML saw their pids, not their use)."""
    zero = [p for p in log.other_processes if p.used_mib <= UNMEASURED_MIB]
    return bool(zero) or (log.process_in_use_mib is not None and log.process_in_use_mib <= UNMEASURED_MIB)


def _whose(
    mib: float, this_run: float | None, reserved: float | None, several_ranks: bool, known_self: bool
) -> Whose:
    """Whose a listed process (not this one) is, from its size and the run's shape."""
    if mib <= CUDA_CONTEXT_MAX_MIB:
        return "context"  # a bare CUDA context: a sibling rank's stray one or an idle kernel
    size = this_run if this_run is not None else reserved
    if several_ranks and size and mib >= SIBLING_SIZE_RATIO * size:
        return "unclear"  # another rank of this run on the same card, or another job: the log cannot tell
    if not known_self and reserved is not None and mib >= reserved - 1.0:
        # this run is not in the list under either form; an entry that can hold its reserve may be this run
        # itself with a large non-PyTorch share (a vLLM engine in the same process), or another job
        return "unclear"
    return "stranger"


def account_of(log: LogFacts | None) -> Account | None:
    """The account of the failing card, or None when the message does not state capacity and free."""
    if log is None or log.capacity_mib is None or log.free_mib is None:
        return None
    reserved = log.reserved_mib
    if reserved is None and log.allocated_mib is not None:
        reserved = log.allocated_mib + (log.reserved_unallocated_mib or 0.0)
    allocated = log.allocated_mib
    unused = log.reserved_unallocated_mib
    if allocated is None and reserved is not None:
        allocated, unused = reserved - (unused or 0.0), unused or 0.0
    own_i = _own_listed(log, reserved) if not _unmeasured_listing(log) else None
    this_run, source, self_pid = None, "reserve", None
    if log.process_in_use_mib is not None and log.process_in_use_mib > UNMEASURED_MIB:
        this_run, source = log.process_in_use_mib, "message"
    elif own_i is not None:
        own = log.other_processes[own_i]
        this_run, source, self_pid = own.used_mib, "listed", own.pid
    several = (log.world_size or 1) > 1 or (log.rank is not None and log.rank > 0)
    known_self = this_run is not None
    listed = tuple(
        Listed(
            p.pid,
            p.used_mib,
            "unmeasured"
            if p.used_mib <= UNMEASURED_MIB
            else _whose(p.used_mib, this_run, reserved, several, known_self),
        )
        for i, p in enumerate(log.other_processes)
        if i != own_i
    )
    listed = _as_own_ranks(listed, log.world_size or log.launcher_world_size)
    old = log.process_in_use_mib is None and not log.other_processes and log.reserved_mib is not None
    return Account(
        capacity_mib=log.capacity_mib,
        free_mib=log.free_mib,
        allocated_mib=allocated,
        reserved_unused_mib=unused,
        this_run_mib=this_run,
        this_run_source=source,
        self_pid=self_pid,
        listed=listed,
        requested_mib=log.requested_mib,
        old_format=old,
    )


# ---------------------------------------------------------------------------------------------- decisions
# The unused reserve is a real share of the card only from this share on: 72 MiB unused on a 15.7 GiB card
# is the allocator's rounding, and a few % left in pieces on a card that full means the next request fails too
# (the batch or the length must change). On the labelled threads the fragmentation cases hold 10.5-36.5 % of
# the card unused, nine cases of other causes 3-7.2 %. One threshold: the finding, `--json` and the rule read it.
FRAGMENTATION_MIN_SHARE = 0.08


def fragmentation_is_real(acc: Account | None) -> bool | None:
    """The unused reserve is a real share of the card and, in one piece, would have served the request
    (with what was free). None when the message lacks the numbers."""
    if acc is None:
        return None
    return reserve_is_real(acc.reserved_unused_mib, acc.free_mib, acc.capacity_mib, acc.requested_mib)


def reserve_is_real(
    reserved_unused_mib: float | None,
    free_mib: float | None,
    capacity_mib: float | None,
    requested_mib: float | None,
) -> bool | None:
    """``fragmentation_is_real`` from the bare numbers (free unknown counts as nothing free)."""
    if reserved_unused_mib is None or requested_mib is None or not capacity_mib:
        return None
    share = reserved_unused_mib / capacity_mib
    return share >= FRAGMENTATION_MIN_SHARE and reserved_unused_mib + (free_mib or 0.0) >= requested_mib


# ---------------------------------------------------------------------------------------------- as text
def _m(value: float | None) -> str:
    """MiB in the account's line: whole, "?" when unknown (as the JSON has always had it)."""
    return units.mib(value, unit=False, missing="?")


def _others_text(acc: Account) -> Text:
    """The listed processes that are not this run, with whose they are (empty when none)."""
    from oomdoctor.i18n import both

    parts: dict[str, list[str]] = {"en": [], "zh": []}
    for p in acc.listed:
        if p.whose == "unmeasured":
            continue
        one = both(f"acct_whose_{p.whose}", pid=p.pid, mib=_m(p.mib))
        for lang in parts:
            parts[lang].append(one[lang])
    if acc.unmeasured:
        pids = ", ".join(str(p.pid) for p in acc.unmeasured)
        one = both("acct_unmeasured", n=len(acc.unmeasured), pids=pids, mib=_m(acc.held_by_unmeasured_mib))
        for lang in parts:
            parts[lang].append(one[lang])
    return Text(en="; ".join(parts["en"]), zh=";".join(parts["zh"]))


def account_text(acc: Account) -> Text:
    """The account as ONE line, en and zh: card = this run (...) + other processes + free."""
    from oomdoctor.i18n import both

    common = {
        "card": _m(acc.capacity_mib),
        "alloc": _m(acc.allocated_mib),
        "unused": _m(acc.reserved_unused_mib),
        "free": _m(acc.free_mib),
    }
    if acc.this_run_mib is not None:
        line = both(
            "acct_line",
            run=_m(acc.this_run_mib),
            nonpt=_m(acc.non_pytorch_mib),
            others=_m(acc.outside_mib),
            **common,
        )
    else:
        line = both("acct_line_reserve", run=_m(acc.reserved_mib), outside=_m(acc.outside_mib), **common)
    notes = []
    if acc.self_pid is not None:
        notes.append(both("acct_self_pid", pid=acc.self_pid))
    if acc.listed:
        notes.append(_others_text(acc))
    elif acc.this_run_mib is None and acc.stranger_mib > 0:
        notes.append(both("acct_outside_big", mib=_m(acc.unlisted_mib), ctx=_m(CUDA_CONTEXT_MAX_MIB)))
    for note in notes:
        line = Text(en=f"{line.en} ({note.en})", zh=f"{line.zh}({note.zh})")
    return line


def account_json(acc: Account | None) -> dict[str, object] | None:
    """The ``account`` object of ``diagnose --json``: the terms of the sum, whose each listed pid is, the line."""
    if acc is None:
        return None

    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 2)

    return {
        "capacity_mib": r(acc.capacity_mib),
        "free_mib": r(acc.free_mib),
        "this_run_mib": r(acc.this_run_mib),
        "this_run_source": acc.this_run_source,
        "pytorch_allocated_mib": r(acc.allocated_mib),
        "reserved_unused_mib": r(acc.reserved_unused_mib),
        "non_pytorch_mib": r(acc.non_pytorch_mib),
        "outside_this_run_mib": r(acc.outside_mib),
        "unlisted_mib": r(acc.unlisted_mib),
        "other_jobs_mib": r(acc.stranger_mib),
        "held_by_unmeasured_mib": r(acc.held_by_unmeasured_mib),
        "self_pid": acc.self_pid,
        "processes": [{"pid": p.pid, "mib": p.mib, "whose": p.whose} for p in acc.listed],
        "fragmentation_real": fragmentation_is_real(acc),
        "line": account_text(acc),
    }
