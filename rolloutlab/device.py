"""Where a trainer's networks and tensors live: one resolver for every ``--device`` flag and ``device`` config field.

Every trainer (MBPO, Dyna-DQN, PETS, the compact GRPO trainer, the in-context agent) takes a ``device`` setting:

* ``"cpu"`` — the default of every config: the tested path, and the one every committed result was computed on;
* ``"cuda"`` / ``"cuda:N"`` — a CUDA GPU (an error, with the reason, when torch sees none);
* ``"auto"`` — ``cuda`` when torch sees a GPU, else ``cpu``.

The default stays ``"cpu"`` rather than ``"auto"`` so that a run means the same computation on every machine unless
asked otherwise: GPU kernels round differently from CPU ones, so a GPU run does not reproduce a CPU result bit for bit.

Only the arithmetic moves. The trainers keep drawing their random numbers from CPU generators (numpy generators and
CPU ``torch.Generator`` objects) and move the draws to the device, so a run's random streams are the same on every
device and a checkpoint's generator states resume on any device (SB3's SAC, inside MBPO, is the exception: it samples
from torch's global generator of its device). Checkpoints are loaded onto the CPU (``map_location="cpu"``,
:func:`rolloutlab.checkpoint.load_checkpoint`) and copied into the networks wherever they live.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported inside the functions: the command-line modules import this one for their --device option, and
# ``rolloutlab --help`` must not pay for importing torch.

__all__ = ["DEVICE_CHOICES", "DEVICE_HELP", "DeviceError", "cpu_arithmetic", "device_option", "resolve_device"]

#: The accepted spellings, for messages.
DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
#: The ``--device`` help text every trainer's command shares.
DEVICE_HELP = "Where the networks run: cpu (default), cuda, cuda:N, or auto (cuda when present)."


class DeviceError(ValueError):
    """A device setting names no usable device here (unknown spelling, unsupported type, or no such GPU)."""


def _no_cuda_reason() -> str:
    import torch

    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is a CPU-only build"
    return f"this torch is built for CUDA {torch.version.cuda} but sees no GPU"


def resolve_device(spec: str | torch.device) -> torch.device:
    """The torch device a ``device`` setting names.

    Args:
        spec: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` (any case, surrounding spaces ignored) or a
            ``torch.device`` of type cpu or cuda.

    Returns:
        ``torch.device("cpu")``, ``torch.device("cuda")`` or ``torch.device("cuda:N")``; ``"auto"`` gives ``cuda``
        when ``torch.cuda.is_available()`` and ``cpu`` otherwise.

    Raises:
        DeviceError: An unknown spelling, another device type (MPS and the like are refused: the world model and the
            normalizers compute in float64, which they do not all support), or CUDA asked for where torch has none
            (or a GPU index past the last one); the message says which.
    """
    import torch

    text = str(spec).strip().lower()
    if text == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError) as exc:
        raise DeviceError(f"unknown device {str(spec)!r}; use {DEVICE_CHOICES}") from exc
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise DeviceError(f"device {str(spec)!r} is not supported; use {DEVICE_CHOICES}")
    if not torch.cuda.is_available():
        raise DeviceError(f"device {str(spec)!r} asked for, but CUDA is not available: {_no_cuda_reason()}")
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceError(
            f"device {str(spec)!r} asked for, but torch sees {torch.cuda.device_count()} GPU(s) (cuda:0 .. "
            f"cuda:{torch.cuda.device_count() - 1})"
        )
    return device


def device_option(value: str | None) -> str | None:
    """Typer callback of the ``--device`` options: the resolved device as text (``None`` passes through).

    The resolved name, not ``"auto"``, is what lands in the run's config, so ``config.yaml`` says where the run
    actually ran.

    Raises:
        typer.BadParameter: :func:`resolve_device` refused the value (exit code 2, one line).
    """
    import typer  # the CLI's library, imported here so that the trainers importing this module do not need it

    if value is None:
        return None
    try:
        return str(resolve_device(value))
    except DeviceError as exc:
        raise typer.BadParameter(str(exc)) from exc


def cpu_arithmetic() -> str:
    """What decides how this machine's CPU rounds torch's arithmetic: the torch build, the kernel set it dispatches to
    (``torch.backends.cpu.get_cpu_capability()``: AVX2, AVX512, ...), the architecture and the CPU model.

    Two runs with the same seeds are bit-identical only where this string is the same: kernels for other instruction
    sets sum in another order, and a training run amplifies the last-bit difference into another trajectory (seen
    in the rollout-length test arms: runs scored on two machines agreed on no final score). Results compared run by
    run record it, so a mix can be found and rescored.

    Returns:
        For example ``"torch 2.13.0+cpu, AVX512, x86_64, AMD EPYC"``.
    """
    import platform

    import torch

    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), model)
    except OSError:
        pass
    return f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, {platform.machine()}, {model}"
