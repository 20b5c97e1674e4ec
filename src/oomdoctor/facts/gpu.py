"""The GPUs, read through a thin NVML facade that never crashes the caller.

Every NVML query fails soft to ``None`` (a field we could not read), and "no NVIDIA driver" is a state with
a reason, not an exception: oomdoctor must work on the CPU machine next to the one that ran out. Only GPUs
the training would see count, so ``CUDA_VISIBLE_DEVICES`` (indices or ``GPU-``/``MIG-`` UUIDs) is applied and
devices are numbered as CUDA numbers them (``cuda:0`` is the first visible card).

pynvml (the ``nvidia-ml-py`` package) is imported lazily, on the first query.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from oomdoctor.facts.types import GpuDevice, GpuFacts, GpuProcess
from oomdoctor.i18n import Lang, msg

MIB = 1024 * 1024

# CUDA fact: bfloat16 arithmetic needs compute capability 8.0 (Ampere) or newer.
BF16_MIN_COMPUTE_CAPABILITY: tuple[int, int] = (8, 0)

# One GPU in one sample: (gpu_index, memory_used_mib, memory_total_mib, util_pct, power_w).
SampleRow = tuple[int, float, float, float | None, float | None]


@runtime_checkable
class GpuSource(Protocol):
    """What the sampler, ``watch`` and ``read_gpu`` read GPUs through."""

    def available(self) -> bool: ...

    def reason(self) -> str | None: ...

    def devices(self) -> list[GpuDevice]: ...

    def sample(self) -> list[SampleRow]: ...


def supports_bf16(compute_capability: tuple[int, int] | None) -> bool | None:
    if compute_capability is None:
        return None
    return tuple(compute_capability) >= BF16_MIN_COMPUTE_CAPABILITY


# --- CUDA_VISIBLE_DEVICES --------------------------------------------------------------------------------


def _leading_int(text: str) -> int:
    """strtoul-like: the integer the text starts with, -1 when there is none (CUDA reads "1gpu" as 1)."""
    text = text.strip()
    digits = ""
    for i, ch in enumerate(text):
        if ch.isdigit() or (i == 0 and ch in "+-"):
            digits += ch
        else:
            break
    try:
        return int(digits)
    except ValueError:
        return -1


def parse_visible_devices(value: str | None) -> list[int] | list[str] | None:
    """Parse ``CUDA_VISIBLE_DEVICES`` the way CUDA does.

    ``None`` (unset) means every GPU. Otherwise a list of indices or of UUID prefixes (``GPU-...``,
    ``MIG-...``); the list stops at the first invalid entry, and a repeated entry hides every GPU.
    """
    if value is None:
        return None
    value = value.strip()
    for prefix in ("GPU-", "MIG-"):
        if value.startswith(prefix):
            uuids: list[str] = []
            for elem in value.split(","):
                elem = elem.strip()
                if elem in uuids:
                    return []
                if not elem.startswith(prefix):
                    break
                uuids.append(elem)
            return uuids
    indices: list[int] = []
    for elem in value.split(","):
        index = _leading_int(elem)
        if index in indices:
            return []
        if index < 0:
            break
        indices.append(index)
    return indices


def resolve_visible(selectors: Sequence[int] | Sequence[str] | None, uuids: Sequence[str]) -> list[int]:
    """Physical (NVML) indices of the visible GPUs, in CUDA order. ``uuids`` lists each physical GPU's UUID.

    An index past the last GPU, or a UUID prefix that matches no GPU or several, ends the list (as in CUDA).
    MIG UUIDs are not resolved here (NVML looks them up directly); they end the list.
    """
    count = len(uuids)
    if selectors is None:
        return list(range(count))
    physical: list[int] = []
    for sel in selectors:
        if isinstance(sel, int):
            if sel >= count:
                break
            physical.append(sel)
            continue
        matches = [i for i, uuid in enumerate(uuids) if uuid.startswith(sel)]
        if len(matches) != 1 or matches[0] in physical:
            break
        physical.append(matches[0])
    return physical


# --- NVML ---------------------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _process_name(pid: int) -> str | None:
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:  # gone, another container's pid, no permission: a name is a nicety
        return None


# Device nodes the NVIDIA driver creates (Linux; /dev/dxg under WSL): NVML cannot work without one, and
# looking for them costs microseconds where importing pynvml costs milliseconds of every start.
_DRIVER_NODES = ("/dev/nvidiactl", "/dev/dxg")


def _driver_device_present() -> bool:
    if not sys.platform.startswith("linux"):
        return True  # elsewhere let NVML itself say
    return any(os.path.exists(node) for node in _DRIVER_NODES)


class NvmlSource:
    """GPUs through NVML (pynvml). Initialises once, lazily; every query fails soft.

    NVML numbers cards by PCI bus; CUDA numbers them fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
    On machines with one kind of card the two agree, which is the case this tool is built for.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._lock = threading.Lock()
        self._tried = False
        self._nvml: Any = None
        self._reason: str | None = None
        self._reason_key: str | None = None
        self._reason_fields: dict[str, Any] = {}
        self._handles: list[tuple[int, int | None, Any]] = []  # (cuda index, nvml index, handle)

    # Lazy init -------------------------------------------------------------------------------------------
    def _ensure(self) -> bool:
        with self._lock:
            if self._tried:
                return self._nvml is not None
            self._tried = True
            if not _driver_device_present():
                self._set_reason("gpu_no_driver_library")
                return False
            try:
                import pynvml
            except ImportError:
                self._set_reason("gpu_no_pynvml")
                return False
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError_LibraryNotFound:
                self._set_reason("gpu_no_driver_library")
                return False
            except pynvml.NVMLError_DriverNotLoaded:
                self._set_reason("gpu_driver_not_loaded")
                return False
            except pynvml.NVMLError as err:
                self._set_reason("gpu_nvml_failed", detail=_text(err))
                return False
            self._nvml = pynvml
            self._handles = self._visible_handles(pynvml)
            if not self._handles:
                self._set_reason("gpu_none_visible", value=self._environ.get("CUDA_VISIBLE_DEVICES", ""))
            return True

    def _set_reason(self, key: str, **fields: Any) -> None:
        self._reason_key, self._reason_fields = key, fields
        self._reason = msg(key, None, **fields)  # both languages: it travels in GpuFacts and JSON

    def reason_in(self, lang: Lang) -> str | None:
        """The reason in one language, for screens."""
        self._ensure()
        return msg(self._reason_key, lang, **self._reason_fields) if self._reason_key else None

    def _visible_handles(self, nvml: Any) -> list[tuple[int, int | None, Any]]:
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError:
            return []
        handles: list[Any] = []
        uuids: list[str] = []
        for i in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            except nvml.NVMLError:
                handle, uuid = None, ""
            handles.append(handle)
            uuids.append(uuid)
        selectors = parse_visible_devices(self._environ.get("CUDA_VISIBLE_DEVICES"))
        if selectors and isinstance(selectors[0], str) and selectors[0].startswith("MIG-"):
            visible: list[tuple[int, int | None, Any]] = []
            for cuda_index, mig_uuid in enumerate(selectors):
                try:
                    visible.append((cuda_index, None, nvml.nvmlDeviceGetHandleByUUID(mig_uuid)))
                except nvml.NVMLError:
                    break
            return visible
        physical = resolve_visible(selectors, uuids)
        return [
            (cuda, phys, handles[phys]) for cuda, phys in enumerate(physical) if handles[phys] is not None
        ]

    def _query(self, fn_name: str, *args: Any) -> Any:
        """One NVML call; ``None`` when it is not supported or fails."""
        try:
            return getattr(self._nvml, fn_name)(*args)
        except Exception:
            return None

    # GpuSource -----------------------------------------------------------------------------------------------
    def available(self) -> bool:
        return self._ensure() and bool(self._handles)

    def reason(self) -> str | None:
        self._ensure()
        return self._reason

    def driver_version(self) -> str | None:
        if not self._ensure():
            return None
        version = self._query("nvmlSystemGetDriverVersion")
        return _text(version) if version is not None else None

    def devices(self) -> list[GpuDevice]:
        if not self._ensure():
            return []
        found: list[GpuDevice] = []
        for cuda_index, _phys, handle in self._handles:
            name = self._query("nvmlDeviceGetName", handle)
            memory = self._query("nvmlDeviceGetMemoryInfo", handle)
            cc = self._query("nvmlDeviceGetCudaComputeCapability", handle)
            capability = (int(cc[0]), int(cc[1])) if cc else None
            found.append(
                GpuDevice(
                    index=cuda_index,
                    name=_text(name) if name is not None else "NVIDIA GPU",
                    total_mib=memory.total / MIB if memory is not None else 0.0,
                    used_mib=memory.used / MIB if memory is not None else None,
                    compute_capability=capability,
                    bf16_supported=supports_bf16(capability),
                    processes=self._processes(handle),
                )
            )
        return found

    def _processes(self, handle: Any) -> list[GpuProcess]:
        running = self._query("nvmlDeviceGetComputeRunningProcesses", handle) or []
        processes = []
        for proc in running:
            used = getattr(proc, "usedGpuMemory", None)
            processes.append(
                GpuProcess(
                    pid=int(proc.pid), used_mib=used / MIB if used else None, name=_process_name(proc.pid)
                )
            )
        return processes

    def sample(self) -> list[SampleRow]:
        if not self._ensure():
            return []
        rows: list[SampleRow] = []
        for cuda_index, _phys, handle in self._handles:
            memory = self._query("nvmlDeviceGetMemoryInfo", handle)
            if memory is None:
                continue
            util = self._query("nvmlDeviceGetUtilizationRates", handle)
            power_mw = self._query("nvmlDeviceGetPowerUsage", handle)
            rows.append(
                (
                    cuda_index,
                    memory.used / MIB,
                    memory.total / MIB,
                    float(util.gpu) if util is not None else None,
                    power_mw / 1000.0 if power_mw is not None else None,
                )
            )
        return rows


# --- Scripted source ----------------------------------------------------------------------------------------


class FakeGpuSource:
    """Scripted GPUs for tests and the TUI's demo mode. No user-facing path may fall back to it silently.

    ``frames`` is a sequence of samples (each a list of ``SampleRow``), played in order; the last repeats.
    Without frames, each sample reports the devices' ``used_mib``.
    """

    def __init__(
        self,
        devices: Iterable[GpuDevice] = (),
        *,
        frames: Sequence[Sequence[SampleRow]] | None = None,
        reason: str | None = None,
        driver: str | None = "fake",
    ) -> None:
        self._devices = list(devices)
        self._frames = [list(frame) for frame in frames] if frames else None
        self._next_frame = 0
        self._reason = reason
        self._driver = driver
        self.samples_taken = 0
        self._lock = threading.Lock()

    @classmethod
    def unavailable(cls, reason: str = "no NVIDIA GPU (fake)") -> FakeGpuSource:
        return cls((), reason=reason, driver=None)

    def available(self) -> bool:
        return self._reason is None and bool(self._devices)

    def reason(self) -> str | None:
        if self._reason is None and not self._devices:
            return "no devices (fake)"
        return self._reason

    def driver_version(self) -> str | None:
        return self._driver if self.available() else None

    def devices(self) -> list[GpuDevice]:
        return [
            GpuDevice(
                index=d.index,
                name=d.name,
                total_mib=d.total_mib,
                used_mib=d.used_mib,
                compute_capability=d.compute_capability,
                bf16_supported=d.bf16_supported
                if d.bf16_supported is not None
                else supports_bf16(d.compute_capability),
                processes=list(d.processes),
            )
            for d in self._devices
        ]

    def sample(self) -> list[SampleRow]:
        if not self.available():
            return []
        with self._lock:
            self.samples_taken += 1
            if self._frames is None:
                return [(d.index, d.used_mib or 0.0, d.total_mib, None, None) for d in self._devices]
            frame = self._frames[min(self._next_frame, len(self._frames) - 1)]
            self._next_frame += 1
            return list(frame)


def read_gpu(source: GpuSource | None = None) -> GpuFacts:
    """The visible GPUs with their processes, or ``available=False`` with the reason. Never raises."""
    source = NvmlSource() if source is None else source
    if not source.available():
        return GpuFacts(available=False, reason=source.reason())
    driver = getattr(source, "driver_version", None)
    return GpuFacts(
        available=True,
        reason=None,
        driver=driver() if callable(driver) else None,
        devices=source.devices(),
    )
