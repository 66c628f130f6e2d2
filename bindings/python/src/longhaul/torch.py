"""DiLoCo and Streaming DiLoCo for PyTorch modules, plain or FSDP2 (``fully_shard``).

``DiLoCo`` wraps longhaul's sync engine (``longhaul.SyncEngine``, src/sync); it reimplements
nothing: the outer optimizer, the fragment schedule, the all-reduces, joiners and lost peers are
the engine's. Under FSDP2 each rank hands the engine its own shards (``DTensor.to_local()``), so
the full model is never gathered: rail r of every node reduces shard r with rail r of the others.

Importing this module imports torch; ``import longhaul`` alone does not.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from . import Communicator, SyncEngine

_OUTER = {"nesterov": "diloco", "diloco": "diloco", "co2": "co2", "eager": "eager"}


def local_tensor(param: torch.Tensor) -> torch.Tensor:
    """This rank's memory of a parameter: the local shard of an FSDP2 DTensor, else the tensor.

    The result shares memory with the parameter (no copy), so writing it writes the parameter.
    """
    to_local = getattr(param, "to_local", None)
    return to_local() if callable(to_local) else param


class DiLoCo:
    """DiLoCo (``fragments=1``) or Streaming DiLoCo (``fragments>1``) over ``model``.

    Hooks ``inner_optimizer.step``: after every inner step the engine launches, applies and
    merges the outer rounds that are due (every ``H`` inner steps per fragment, applied
    ``sync_delay`` steps after the launch). Call ``join()`` once before training, on every rank
    (it seeds the group's outer state, or downloads it when the run is already going), and
    ``close()`` at the same step on every rank before leaving.

    Args:
        model: an ``nn.Module``, plain or sharded with ``fully_shard`` (FSDP2). Its parameters
            must be float32 or bfloat16 tensors, on the CPU or on CUDA devices, and keep their
            memory while training (as FSDP2's sharded parameters and plain modules do; checked
            at every step). CUDA parameters are staged through pinned host memory at each sync
            (docs/gpu.md); before each engine step the device's default stream is made to wait
            for its current stream (on the GPU: the host does not wait), which orders the
            engine's copies after the optimizer's writes.
        inner_optimizer: the optimizer whose ``step`` counts inner steps.
        comm: a connected ``longhaul.Communicator`` (one per rank: its rail's group).
        H: inner steps between two syncs of a fragment.
        fragments: F, the number of fragments: parameter i (in ``model.parameters()`` order)
            belongs to fragment i mod F, on every rank and every node.
        sync_delay: tau, inner steps between a round's launch and its outer update.
        quant: the pseudo-gradients' wire codec: None, "fp16", "bf16", "u8", "u4", "e3m0" or
            "sparse" (with topk_per_chunk= and chunk= among engine_options; nesterov only).
        outer_lr, momentum: the outer optimizer's (None: the library's defaults, 0.7 and 0.9).
        outer: "nesterov" (DiLoCo), "co2" or "eager".
        **engine_options: any other ``longhaul.SyncEngine`` option (mix, deadline_ms, ...).

    When ``torch.distributed`` is initialized with more than one rank (the ranks of this node),
    the communicator is switched to ``on_eviction="exit"``: if another rank of the node dies,
    the master evicts the node and this process exits at once (status 4, a message on stderr)
    instead of hanging in an intra-node collective such as FSDP's all-gather.
    """

    def __init__(self, model: torch.nn.Module, inner_optimizer: torch.optim.Optimizer,
                 comm: Communicator, *, H: int = 100, fragments: int = 1, sync_delay: int = 0,
                 quant: str | None = None, outer_lr: float | None = None,
                 momentum: float | None = None, outer: str = "nesterov", **engine_options: Any):
        if outer not in _OUTER:
            raise ValueError(f"outer must be 'nesterov', 'co2' or 'eager', not {outer!r}")
        for name, value, least in (("H", H, 1), ("fragments", fragments, 1), ("sync_delay", sync_delay, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"DiLoCo: {name} must be an int >= {least}, not {value!r}")
        self.model = model
        self.comm = comm
        # Parameter i (in model.parameters() order) belongs to fragment i mod F on every rank; a
        # rank's empty shards (FSDP2 pads uneven ones) are left out.
        local = [(i % fragments, local_tensor(p)) for i, p in enumerate(model.parameters())]
        local = [(f, t) for f, t in local if t.numel() > 0]
        self.params = [t for _, t in local]
        pieces = [(f, r, 0, t.numel()) for r, (f, t) in enumerate(local)]
        if not self.params:
            raise ValueError("the model has no parameters on this rank")
        for t in self.params:
            if t.device.type not in ("cpu", "cuda"):
                raise ValueError(f"DiLoCo: a parameter is on {t.device}; longhaul syncs CPU "
                                 "and CUDA parameters")
        self._cuda_devices = sorted({t.device for t in self.params if t.device.type == "cuda"},
                                    key=str)
        self._ptrs = [t.data_ptr() for t in self.params]
        self._options = dict(fragments=fragments, sync_every=H, delay=sync_delay, quant=quant,
                             outer_lr=outer_lr, outer_momentum=momentum, method=_OUTER[outer],
                             pieces=pieces, **engine_options)
        self.engine: SyncEngine | None = None
        self._hook = inner_optimizer.register_step_post_hook(self._after_step)
        #: Seconds spent in the optimizer hook (the engine's step, syncs included) since creation:
        #: what DiLoCo adds to the training loop's wall time.
        self.hook_seconds = 0.0
        if torch.distributed.is_available() and torch.distributed.is_initialized() \
                and torch.distributed.get_world_size() > 1:
            comm.on_eviction = "exit"

    def join(self) -> DiLoCo:
        """Starts the engine (a collective of the rail's group): the group's first start elects
        the global parameters among the peers' own and sets every peer's to them; a later peer
        downloads the global parameters and the outer state and joins the schedule where the
        group is. Returns self."""
        if self.engine is None:
            self.engine = SyncEngine(self.comm, self.params, **self._options)
        return self

    def _after_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        t0 = time.perf_counter()
        try:
            self._run_engine_step()
        finally:
            self.hook_seconds += time.perf_counter() - t0

    def _run_engine_step(self) -> None:
        if self.engine is None:
            self.join()
        if [t.data_ptr() for t in self.params] != self._ptrs:
            raise RuntimeError("DiLoCo: a parameter's memory moved since DiLoCo was created "
                               "(create DiLoCo after fully_shard and after moving the model)")
        assert self.engine is not None
        # The engine copies CUDA parameters on its own streams, which are blocking streams: ordered
        # after the legacy default stream. Making that stream wait for the current one (an event,
        # on the GPU) orders the copies after the optimizer's writes without a host wait, as
        # DLPack's stream handshake does for the collectives (tensors.cpp).
        for device in self._cuda_devices:
            torch.cuda.default_stream(device).wait_stream(torch.cuda.current_stream(device))
        self.engine.step()

    def hash(self) -> int:
        """The engine's shared-state hash: the same on every node of this rail between steps."""
        return self._engine().hash()

    def stats(self) -> dict[str, int | bool]:
        """The engine's counters (rounds applied, dropped, retries, traffic, ...)."""
        return self._engine().stats()

    def close(self) -> None:
        """Settles the round in flight with the group, stops the engine and unhooks the
        optimizer. Call it on every rank at the same step. Idempotent."""
        self._hook.remove()
        if self.engine is not None:
            self.engine.close()
            self.engine.destroy()
            self.engine = None

    def _engine(self) -> SyncEngine:
        if self.engine is None:
            raise RuntimeError("DiLoCo: call join() first")
        return self.engine

