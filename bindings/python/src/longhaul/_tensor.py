"""The tensor type of longhaul's signatures: anything that crosses by DLPack."""
from typing import Any, Protocol, Tuple


class DLPackTensor(Protocol):
    """A tensor longhaul reads or writes without a copy: a ``torch.Tensor``, a
    ``numpy.ndarray``, or any object with ``__dlpack__`` and ``__dlpack_device__``, in CPU memory
    (``Communicator.allreduce`` also takes CUDA tensors: docs/gpu.md)."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

    def __dlpack_device__(self) -> Tuple[int, int]: ...
