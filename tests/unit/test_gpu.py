"""The NVML facade: CUDA_VISIBLE_DEVICES, fail-soft queries, the no-driver state, the scripted source."""

from __future__ import annotations

import sys
import types

import pytest

import oomdoctor.facts.gpu as gpu_module
from oomdoctor.facts.gpu import (
    FakeGpuSource,
    GpuSource,
    NvmlSource,
    parse_visible_devices,
    read_gpu,
    resolve_visible,
    supports_bf16,
)
from oomdoctor.facts.types import GpuDevice, GpuProcess

# --- CUDA_VISIBLE_DEVICES --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", []),
        ("0", [0]),
        ("2,0", [2, 0]),
        (" 1 , 3 ", [1, 3]),
        ("1gpu,2", [1, 2]),  # CUDA reads leading digits, like strtoul
        ("0,-1,2", [0]),  # a negative entry ends the list
        ("0,x,2", [0]),  # so does garbage
        ("1,1", []),  # a repeated entry hides every GPU
        ("GPU-aaaa,GPU-bbbb", ["GPU-aaaa", "GPU-bbbb"]),
        ("GPU-aaaa,0", ["GPU-aaaa"]),
        ("GPU-aaaa,GPU-aaaa", []),
        ("MIG-1234", ["MIG-1234"]),
    ],
)
def test_parse_visible_devices_follows_cuda(value: str | None, expected: object) -> None:
    assert parse_visible_devices(value) == expected


UUIDS = ["GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-cccc-3333"]


@pytest.mark.parametrize(
    ("selectors", "expected"),
    [
        (None, [0, 1, 2]),
        ([], []),
        ([2, 0], [2, 0]),
        ([1, 7, 0], [1]),  # an index past the last card ends the list
        (["GPU-bbbb"], [1]),  # unique UUID prefixes are accepted
        (["GPU-cccc-3333", "GPU-aaaa-1111"], [2, 0]),
        (["GPU-"], []),  # ambiguous prefix
        (["GPU-aaaa", "GPU-zzzz", "GPU-bbbb"], [0]),
    ],
)
def test_resolve_visible_maps_to_physical_indices(selectors: object, expected: list[int]) -> None:
    assert resolve_visible(selectors, UUIDS) == expected  # type: ignore[arg-type]


def test_bf16_needs_ampere() -> None:
    assert supports_bf16((7, 0)) is False  # V100
    assert supports_bf16((7, 5)) is False  # T4
    assert supports_bf16((8, 0)) is True  # A100
    assert supports_bf16((9, 0)) is True  # H100/H200
    assert supports_bf16(None) is None


# --- Real pynvml on a machine without a driver --------------------------------------------------------------


def test_nvml_without_driver_is_a_state_not_a_crash() -> None:
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # pragma: no cover - only on a machine with a GPU
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a working NVIDIA driver")
    source = NvmlSource()
    assert source.available() is False
    assert source.reason()
    assert source.devices() == []
    assert source.sample() == []
    facts = read_gpu(source)
    assert facts.available is False
    assert facts.reason == source.reason()
    assert facts.devices == []
    # one language for screens, both in the facts (they travel in JSON)
    zh, en = source.reason_in("zh"), source.reason_in("en")
    assert zh and en and zh != en and facts.reason == f"{en} / {zh}"


# --- NvmlSource logic against a scripted pynvml module ----------------------------------------------------


class _NVMLError(Exception):
    pass


def _fake_pynvml(
    cards: list[dict], *, init_error: str | None = None, power_fails: bool = False
) -> types.ModuleType:
    """A stand-in for the pynvml module with the calls NvmlSource makes (only for logic tests)."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = _NVMLError
    mod.NVMLError_LibraryNotFound = type("NVMLError_LibraryNotFound", (_NVMLError,), {})
    mod.NVMLError_DriverNotLoaded = type("NVMLError_DriverNotLoaded", (_NVMLError,), {})
    mod.init_calls = 0

    def nvmlInit() -> None:
        mod.init_calls += 1
        if init_error is not None:
            raise getattr(mod, init_error)("scripted")

    mod.nvmlInit = nvmlInit
    mod.nvmlDeviceGetCount = lambda: len(cards)
    mod.nvmlDeviceGetHandleByIndex = lambda i: cards[i]
    mod.nvmlDeviceGetUUID = lambda h: h["uuid"]
    mod.nvmlDeviceGetName = lambda h: h["name"].encode()  # old pynvml returns bytes
    mod.nvmlSystemGetDriverVersion = lambda: "550.54"
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(
        used=h["used"] * 2**20, total=h["total"] * 2**20
    )
    mod.nvmlDeviceGetCudaComputeCapability = lambda h: h["cc"]
    mod.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=h["util"])

    def power(h: dict) -> int:
        if power_fails:
            raise _NVMLError("Not Supported")
        return h["power_mw"]

    mod.nvmlDeviceGetPowerUsage = power
    mod.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=pid, usedGpuMemory=used * 2**20 if used else None)
        for pid, used in h["procs"]
    ]
    return mod


CARDS = [
    {"uuid": "GPU-aaaa", "name": "Tesla V100-SXM2-32GB", "used": 500.0, "total": 32768.0, "cc": (7, 0),
     "util": 3, "power_mw": 45000, "procs": []},
    {"uuid": "GPU-bbbb", "name": "NVIDIA A100-SXM4-80GB", "used": 20000.0, "total": 81920.0, "cc": (8, 0),
     "util": 97, "power_mw": 310500, "procs": [(4242, 19000.0), (4343, None)]},
]  # fmt: skip


REAL_DRIVER_CHECK = gpu_module._driver_device_present


@pytest.fixture(autouse=True)
def _driver_present(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests script pynvml itself; the device-node check in front of it is tested on its own below."""
    monkeypatch.setattr(gpu_module, "_driver_device_present", lambda: True)


def test_no_driver_device_node_means_no_gpu_without_importing_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_module, "_driver_device_present", lambda: False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # importing it would fail the other way
    source = NvmlSource(environ={})
    assert not source.available()
    assert source.reason() == gpu_module.msg("gpu_no_driver_library", None)


def test_driver_device_check_looks_for_the_driver_nodes(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(gpu_module, "_DRIVER_NODES", (str(tmp_path / "nvidiactl"),))
    assert not REAL_DRIVER_CHECK()
    (tmp_path / "nvidiactl").touch()
    assert REAL_DRIVER_CHECK()


def test_nvml_reads_cards_and_numbers_them_as_cuda_does(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_pynvml(CARDS)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    source = NvmlSource(environ={"CUDA_VISIBLE_DEVICES": "1,0"})
    assert source.available()
    devices = source.devices()
    assert [d.name for d in devices] == ["NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB"]
    assert [d.index for d in devices] == [0, 1]  # cuda:0 is physical card 1
    a100 = devices[0]
    assert a100.total_mib == pytest.approx(81920.0)
    assert a100.compute_capability == (8, 0) and a100.bf16_supported is True
    assert devices[1].bf16_supported is False
    assert [(p.pid, p.used_mib) for p in a100.processes] == [(4242, pytest.approx(19000.0)), (4343, None)]
    assert source.sample() == [(0, 20000.0, 81920.0, 97.0, 310.5), (1, 500.0, 32768.0, 3.0, 45.0)]
    facts = read_gpu(source)
    assert facts.available and facts.driver == "550.54" and len(facts.devices) == 2
    source.sample()
    assert fake.init_calls == 1  # lazy init happens once


def test_nvml_uuid_selection_and_failing_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(CARDS, power_fails=True))
    source = NvmlSource(environ={"CUDA_VISIBLE_DEVICES": "GPU-bbbb"})
    rows = source.sample()
    assert rows == [(0, 20000.0, 81920.0, 97.0, None)]  # power unsupported -> None, not a crash


def test_nvml_hidden_by_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(CARDS))
    source = NvmlSource(environ={"CUDA_VISIBLE_DEVICES": ""})
    assert source.available() is False
    assert "CUDA_VISIBLE_DEVICES" in (source.reason() or "")


@pytest.mark.parametrize(
    "error_name", ["NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded", "NVMLError"]
)
def test_nvml_init_errors_become_reasons(monkeypatch: pytest.MonkeyPatch, error_name: str) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(CARDS, init_error=error_name))
    source = NvmlSource(environ={})
    assert source.available() is False
    reasons = {
        "NVMLError_LibraryNotFound": "no NVIDIA driver found",
        "NVMLError_DriverNotLoaded": "not loaded",
        "NVMLError": "NVML could not start: scripted",
    }
    assert reasons[error_name] in (source.reason() or "")
    assert read_gpu(source).available is False


def test_no_pynvml_installed_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    source = NvmlSource(environ={})
    assert source.available() is False
    assert "nvidia-ml-py" in (source.reason() or "")


# --- FakeGpuSource ------------------------------------------------------------------------------------------


def test_fake_source_plays_frames_then_repeats_the_last() -> None:
    dev = GpuDevice(index=0, name="Tesla V100-SXM2-32GB", total_mib=32768.0, used_mib=0.0, compute_capability=(7, 0),
                    processes=[GpuProcess(pid=7, used_mib=100.0)])  # fmt: skip
    fake = FakeGpuSource(
        [dev], frames=[[(0, 100.0, 32768.0, 0.0, 40.0)], [(0, 28588.0, 32768.0, 99.0, 250.0)]]
    )
    assert isinstance(fake, GpuSource)
    assert fake.sample()[0][1] == 100.0
    assert fake.sample()[0][1] == 28588.0
    assert fake.sample()[0][1] == 28588.0
    assert fake.samples_taken == 3
    facts = read_gpu(fake)
    assert facts.available and facts.first is not None
    assert facts.first.bf16_supported is False  # derived from the compute capability
    assert facts.first.processes[0].pid == 7


def test_fake_source_without_frames_reports_device_usage() -> None:
    fake = FakeGpuSource([GpuDevice(index=0, name="x", total_mib=1000.0, used_mib=250.0)])
    assert fake.sample() == [(0, 250.0, 1000.0, None, None)]


def test_unavailable_fake_source() -> None:
    fake = FakeGpuSource.unavailable("scripted: no GPU")
    assert fake.available() is False
    assert fake.sample() == []
    assert read_gpu(fake).reason == "scripted: no GPU"
