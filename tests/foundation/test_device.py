"""``rolloutlab.device``: the one resolver behind every trainer's ``--device`` flag and ``device`` config field."""

from __future__ import annotations

import pytest
import torch
import typer

from rolloutlab.device import DeviceError, cpu_arithmetic, device_option, resolve_device

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where torch has no CUDA")


@pytest.mark.parametrize("spec", ["cpu", "CPU", " cpu ", "cpu:0", torch.device("cpu")])
def test_cpu_spellings(spec: str | torch.device) -> None:
    assert resolve_device(spec) == torch.device("cpu")


def test_auto_is_cuda_where_present_else_cpu() -> None:
    expected = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    assert resolve_device("auto") == expected
    assert resolve_device("AUTO") == expected


@pytest.mark.parametrize(("spec", "message"), [("gpu", "unknown device 'gpu'"), ("mps", "not supported")])
def test_unknown_or_unsupported_devices_are_refused(spec: str, message: str) -> None:
    with pytest.raises(DeviceError, match=message):
        resolve_device(spec)


@no_cuda
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "CUDA:1"])
def test_cuda_without_cuda_is_one_clear_error(spec: str) -> None:
    with pytest.raises(DeviceError, match=r"asked for, but CUDA is not available: this torch") as info:
        resolve_device(spec)
    assert "\n" not in str(info.value)


def test_a_gpu_index_past_the_last_is_refused() -> None:
    with pytest.raises(DeviceError, match="cuda:99"):
        resolve_device("cuda:99")


def test_device_option_resolves_for_the_config_and_refuses_as_bad_parameter() -> None:
    assert device_option(None) is None
    assert device_option("cpu") == "cpu"
    assert device_option("auto") == str(resolve_device("auto"))
    with pytest.raises(typer.BadParameter, match="unknown device"):
        device_option("nope")


def test_cpu_arithmetic_names_the_torch_build_and_its_kernel_set() -> None:
    machine = cpu_arithmetic()
    assert machine.startswith(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, ")
    assert machine == cpu_arithmetic()  # the same on every call: results compare it as a string
