"""A local stand-in for a ``vllm serve`` process, for testing TRL's own ``VLLMClient`` on a CPU without vLLM.

Importable from every test as ``local_vllm_server`` (pytest puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``).

:class:`LocalVLLMServer` is a real HTTP server on ``127.0.0.1`` (a free port, standard-library ``http.server``, one
thread per request) that answers the endpoints TRL's ``VLLMClient`` and ``VLLMGeneration`` (1.11 to 1.16) call in
server mode:

* ``GET /health``, ``/v1/models``, ``/get_world_size``, ``/server_info`` (``logprobs_mode: processed_logprobs`` and a
  weight-transfer engine, as TRL requires);
* ``POST /v1/completions`` with token-id prompts, ``n``, ``temperature``, ``top_k``, ``max_tokens`` and ``logprobs``:
  samples from a transformers causal LM token by token and returns vLLM's response shape (choices prompt-major,
  ``prompt_token_ids``, ``token_ids`` with the EOS token, ``logprobs`` as ``token_id:<id>`` strings with the
  log-probability of each sampled token after temperature and top-k, vLLM's ``processed_logprobs``);
  ``top_p``, ``min_p`` and ``repetition_penalty`` other than their defaults are answered with HTTP 400;
* ``POST /init_weight_transfer_engine``, ``/start_weight_update``, ``/update_weights``, ``/finish_weight_update``,
  ``/reset_prefix_cache``: the weight-sync handshake. ``/update_weights`` blocks, as vLLM's NCCL receive does, until
  the tensors it announced arrive, checks their names, dtypes and shapes, and loads them into the served model.

vLLM moves the tensors over NCCL (a CUDA-only ``StatelessProcessGroup``); :func:`patch_client_for_http` replaces
exactly that transport in TRL's client (``init_communicator`` and the broadcast) by ``POST /test/weights`` with the
tensors in safetensors format, and declares vLLM available to TRL's generation module. Everything else, TRL's request
building, response parsing, weight naming and sync schedule, runs unchanged.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlparse

import pytest
import requests
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

MODEL_NAME = "local-tiny-lm"


class LocalVLLMServer:
    """Serves ``model`` over the ``vllm serve`` endpoints TRL's client uses; see the module docstring.

    Args:
        model: A transformers causal LM (its own copy: weight updates load into it).
        eos_token_id: Generation stops after this token (kept in ``token_ids``, as vLLM does).
        seed: Seed of the sampling generator.

    Attributes:
        requests: ``(path, payload)`` of every request answered, in order.
        weight_loads: How many weight updates were loaded into the model.
    """

    def __init__(self, model: torch.nn.Module, eos_token_id: int, seed: int = 0) -> None:
        self.model = model.eval()
        self.eos_token_id = int(eos_token_id)
        self.generator = torch.Generator().manual_seed(seed)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.weight_loads = 0
        self._weights: dict[str, torch.Tensor] | None = None
        self._weights_arrived = threading.Condition()
        self._model_lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> str:
        """Listen on a free port of 127.0.0.1 in a background thread; returns the base URL."""
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{server.server_address[1]}"

    def stop(self) -> None:
        """Stop listening and join the server thread."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def paths(self, path: str) -> list[dict[str, Any]]:
        """The payloads of every request to ``path``."""
        return [p for q, p in self.requests if q == path]

    # --- endpoints -------------------------------------------------------------------------------------------
    def get(self, path: str) -> tuple[int, Any]:
        if path == "/health":
            return 200, {}
        if path == "/v1/models":
            return 200, {"data": [{"id": MODEL_NAME}]}
        if path == "/get_world_size":
            return 200, {"world_size": 1}
        if path == "/server_info":
            config = {
                "weight_transfer_config": {"backend": "http"},
                "model_config": {"logprobs_mode": "processed_logprobs"},
            }
            return 200, {"vllm_config": config}
        return 404, {"error": f"no GET {path}"}

    def post(self, path: str, payload: dict[str, Any], body: bytes) -> tuple[int, Any]:
        if path == "/v1/completions":
            return self.completions(payload)
        if path == "/test/weights":
            with self._weights_arrived:
                self._weights = load_safetensors(body)
                self._weights_arrived.notify_all()
            return 200, {}
        if path == "/update_weights":
            return self.update_weights(payload["update_info"])
        if path in ("/init_weight_transfer_engine", "/start_weight_update", "/finish_weight_update"):
            return 200, {}
        if path == "/reset_prefix_cache":
            return 200, {"success": True}
        return 404, {"error": f"no POST {path}"}

    def update_weights(self, info: dict[str, Any]) -> tuple[int, Any]:
        with self._weights_arrived:
            if not self._weights_arrived.wait_for(lambda: self._weights is not None, timeout=60):
                return 500, {"error": "the announced weights never arrived"}
            weights, self._weights = self._weights, None
        assert weights is not None
        params = dict(self.model.named_parameters())
        announced = list(zip(info["names"], info["dtype_names"], info["shapes"], strict=True))
        if sorted(weights) != sorted(info["names"]):
            return 400, {"error": f"announced {sorted(info['names'])}, received {sorted(weights)}"}
        for name, dtype, shape in announced:
            if name not in params:
                return 400, {"error": f"the served model has no parameter {name!r}"}
            tensor = weights[name]
            if str(tensor.dtype).removeprefix("torch.") != dtype or list(tensor.shape) != list(shape):
                return 400, {"error": f"{name}: announced {dtype}{shape}, received {tensor.dtype}{list(tensor.shape)}"}
        with self._model_lock, torch.no_grad():
            for name, _, _ in announced:
                params[name].copy_(weights[name])
        self.weight_loads += 1
        return 200, {}

    def completions(self, payload: dict[str, Any]) -> tuple[int, Any]:
        defaults = {"top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0}
        unsupported = {k: payload[k] for k, v in defaults.items() if payload.get(k, v) != v}
        if unsupported:
            return 400, {"error": f"the local server does not implement {unsupported}"}
        prompts = payload["prompt"]
        if not prompts or not all(isinstance(p, list) for p in prompts):
            return 400, {"error": "prompts must be token-id lists"}
        choices: list[dict[str, Any]] = []
        with self._model_lock:
            for prompt in prompts:
                for _ in range(int(payload.get("n", 1))):
                    ids, logps = self._sample(
                        prompt,
                        float(payload.get("temperature", 1.0)),
                        int(payload.get("top_k", 0) or 0),
                        int(payload.get("max_tokens", 16)),
                    )
                    logprobs = None
                    if payload.get("logprobs") is not None:
                        tokens = [f"token_id:{t}" for t in ids]
                        logprobs = {"tokens": tokens, "token_logprobs": logps, "top_logprobs": [None] * len(ids)}
                    choices.append(
                        {
                            "index": len(choices),
                            "text": "",
                            "prompt_token_ids": list(prompt),
                            "token_ids": ids,
                            "logprobs": logprobs,
                            "finish_reason": "stop" if ids and ids[-1] == self.eos_token_id else "length",
                        }
                    )
        return 200, {"id": "cmpl-local", "object": "text_completion", "model": MODEL_NAME, "choices": choices}

    def _sample(
        self, prompt: list[int], temperature: float, top_k: int, max_tokens: int
    ) -> tuple[list[int], list[float]]:
        return sample(self.model, self.generator, prompt, temperature, top_k, max_tokens, self.eos_token_id)


def sample(
    model: torch.nn.Module,
    generator: torch.Generator,
    prompt: list[int],
    temperature: float,
    top_k: int,
    max_tokens: int,
    eos_token_id: int,
) -> tuple[list[int], list[float]]:
    """Sample one completion token by token; returns its token ids (EOS kept) and each token's log-probability after
    temperature and top-k (vLLM's ``processed_logprobs``). ``temperature == 0`` is greedy."""
    ids = list(prompt)
    out: list[int] = []
    logps: list[float] = []
    with torch.no_grad():
        for _ in range(max_tokens):
            logits = model(torch.tensor([ids])).logits[0, -1].float()
            if temperature > 0:
                logits = logits / temperature
            if top_k > 0:
                kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            logp = torch.log_softmax(logits, dim=-1)
            if temperature == 0:
                token = int(logp.argmax())
            else:
                token = int(torch.multinomial(logp.exp(), 1, generator=generator))
            out.append(token)
            logps.append(float(logp[token]))
            ids.append(token)
            if token == eos_token_id:
                break
    return out, logps


def _handler(server: LocalVLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as requests' session expects

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = urlparse(self.path).path
            server.requests.append((path, {}))
            self._answer(*server.get(path))

        def do_POST(self) -> None:
            path = urlparse(self.path).path
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            payload: dict[str, Any] = {}
            if body and self.headers.get("Content-Type", "").startswith("application/json"):
                payload = json.loads(body)
            server.requests.append((path, payload))
            try:
                self._answer(*server.post(path, payload, body))
            except Exception as exc:  # a bug in the test server shows in the client's error, not as a hang
                self._answer(500, {"error": repr(exc)})

    return Handler


# --- TRL's client, with the NCCL transport replaced by HTTP ---------------------------------------------------
@dataclass
class _HttpGroup:
    """Stands in for vLLM's ``PyNcclCommunicator``: TRL's ``close_communicator`` clears ``group.store/socket``."""

    base_url: str
    session: requests.Session
    store: Any = None
    socket: Any = None


@dataclass
class _HttpCommunicator:
    group: _HttpGroup


@dataclass
class _SendArgs:
    """Stands in for vLLM's ``NCCLTrainerSendWeightsArgs``."""

    group: _HttpCommunicator
    packed: bool = True


class _HttpWeightEngine:
    """Stands in for vLLM's ``NCCLWeightTransferEngine`` on the trainer side: sends the tensors over HTTP."""

    @staticmethod
    def trainer_send_weights(iterator: Any, trainer_args: _SendArgs) -> None:
        tensors = {name: tensor.detach().to("cpu").contiguous().clone() for name, tensor in iterator}
        group = trainer_args.group.group
        response = group.session.post(f"{group.base_url}/test/weights", data=save_safetensors(tensors))
        response.raise_for_status()


def _init_http_communicator(self: Any, device: Any = 0) -> None:
    """``VLLMClient.init_communicator`` without NCCL: the same checks and handshake, an HTTP channel instead."""
    # TRL 1.16's check (earlier clients have no get_server_info and make none).
    if hasattr(self, "get_server_info") and self.get_server_info()["weight_transfer_config"] is None:
        raise RuntimeError("the server has no weight-transfer engine")
    init_info = {"master_address": "127.0.0.1", "rank_offset": 1, "world_size": self.get_world_size() + 1}
    self._post(f"{self.base_url}/init_weight_transfer_engine", json={"init_info": init_info})
    self.communicator = _HttpCommunicator(_HttpGroup(self.base_url, self.session))


def patch_client_for_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let TRL's server-mode generation run without vLLM: declare vLLM available to TRL's generation modules and
    replace the NCCL weight transport of ``VLLMClient`` by :class:`LocalVLLMServer`'s ``/test/weights``."""
    import trl.generation.vllm_client as client
    import trl.generation.vllm_generation as generation

    monkeypatch.setattr(client, "is_vllm_available", lambda *args, **kwargs: True)
    monkeypatch.setattr(generation, "is_vllm_available", lambda *args, **kwargs: True)
    # The client's vLLM-version switches (absent in the older supported TRL releases, which take the same paths).
    monkeypatch.setattr(client, "_HAS_STATEFUL_TRAINER_ENGINE", False, raising=False)
    monkeypatch.setattr(client, "_HAS_RESET_PREFIX_CACHE_SUCCESS", True, raising=False)
    monkeypatch.setattr(client, "NCCLWeightTransferEngine", _HttpWeightEngine, raising=False)
    monkeypatch.setattr(client, "NCCLTrainerSendWeightsArgs", _SendArgs, raising=False)
    monkeypatch.setattr(client.VLLMClient, "init_communicator", _init_http_communicator)


# --- colocate mode: an in-process stand-in for vllm.LLM -------------------------------------------------------------
@dataclass
class _SamplingParams:
    """Stands in for ``vllm.SamplingParams``: keeps what TRL's colocate path sets."""

    n: int = 1
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    max_tokens: int = 16
    logprobs: int | None = 0


@dataclass
class _Logprob:
    logprob: float
    rank: int = 1


class LocalLLM:
    """Stands in for ``vllm.LLM`` in TRL's colocate mode: the same sampler as :class:`LocalVLLMServer`, in-process.

    TRL loads weights through ``llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights``; here
    that copies the tensors into the served model. Built by :func:`patch_colocate`, which fixes the served model.

    Attributes:
        calls: The ``(prompt token ids, sampling params)`` of every ``generate`` call.
        weight_syncs: How many ``reset_prefix_cache`` calls (TRL makes one after each weight sync).
    """

    served: torch.nn.Module
    eos_token_id: int
    instances: list[LocalLLM]

    def __init__(self, model: str, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.generator = torch.Generator().manual_seed(int(kwargs.get("seed", 0)))
        self.calls: list[tuple[list[list[int]], _SamplingParams]] = []
        self.weight_syncs = 0
        served = self.served

        def load_weights(weights: list[tuple[str, torch.Tensor]]) -> None:
            params = dict(served.named_parameters())
            with torch.no_grad():
                for name, tensor in weights:
                    params[name].copy_(tensor)

        runner = SimpleNamespace(model=SimpleNamespace(load_weights=load_weights))
        executor = SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
        self.llm_engine = SimpleNamespace(model_executor=executor)
        type(self).instances.append(self)

    def generate(
        self, prompts: list[dict[str, Any]], sampling_params: _SamplingParams, use_tqdm: bool = False
    ) -> list[Any]:
        ids = [list(p["prompt_token_ids"]) for p in prompts]
        self.calls.append((ids, sampling_params))
        outputs = []
        for prompt in ids:
            samples = []
            for _ in range(sampling_params.n):
                p = sampling_params
                tokens, logps = sample(
                    self.served, self.generator, prompt, p.temperature, p.top_k, p.max_tokens, self.eos_token_id
                )
                logprobs = [{t: _Logprob(lp)} for t, lp in zip(tokens, logps, strict=True)]
                samples.append(SimpleNamespace(token_ids=tokens, logprobs=logprobs))
            outputs.append(SimpleNamespace(prompt_token_ids=prompt, outputs=samples))
        return outputs

    def reset_prefix_cache(self) -> None:
        self.weight_syncs += 1


def patch_colocate(monkeypatch: pytest.MonkeyPatch, model: torch.nn.Module, eos_token_id: int) -> type[LocalLLM]:
    """Let TRL's colocate generation run without vLLM, on :class:`LocalLLM` serving ``model``; returns the class
    (its ``instances`` holds the one TRL builds). The environment variables TRL sets for vLLM are restored after."""
    import trl.generation.vllm_generation as generation

    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    bound = {"served": model.eval(), "eos_token_id": int(eos_token_id), "instances": []}
    llm = type("BoundLocalLLM", (LocalLLM,), bound)
    monkeypatch.setattr(generation, "is_vllm_available", lambda *args, **kwargs: True)
    monkeypatch.setattr(generation, "LLM", llm, raising=False)
    monkeypatch.setattr(generation, "SamplingParams", _SamplingParams, raising=False)
    return llm
