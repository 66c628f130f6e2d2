"""longhaul: fault-tolerant, low-bandwidth collectives for training across the internet.

The classes and errors come from the C library (``longhaul._longhaul``, a nanobind extension);
tensors cross by DLPack, zero-copy. Importing this package imports neither torch nor numpy:
``longhaul.torch`` (DiLoCo over plain and FSDP2 modules) imports torch when it is imported.
docs/python.md is the guide.
"""

import importlib.util as _util
import os as _os


def _point_at_the_nccl_wheel() -> None:
    """The GPU layer loads NCCL at run time: the copy the process has (PyTorch's), else
    LONGHAUL_NCCL_LIBRARY, else the loader's search path. Where the nvidia-nccl-cu13 wheel is
    installed and nothing is set, point at the wheel's library (finding it imports nothing)."""
    if _os.environ.get("LONGHAUL_NCCL_LIBRARY"):
        return
    try:
        spec = _util.find_spec("nvidia.nccl")
    except (ImportError, ValueError):
        return
    for folder in (spec.submodule_search_locations or []) if spec else []:
        library = _os.path.join(folder, "lib", "libnccl.so.2")
        if _os.path.exists(library):
            _os.environ["LONGHAUL_NCCL_LIBRARY"] = library
            return


_point_at_the_nccl_wheel()

from ._longhaul import (  # noqa: E402 - after the environment is set for the library
    Closed,
    Communicator,
    LocalGroup,
    LonghaulError,
    Master,
    MasterUnreachable,
    Mismatch,
    NodeEvicted,
    PeerFailure,
    StateLayoutError,
    SyncEngine,
    SyncInfo,
    Timeout,
    Unsupported,
    Work,
    secret_from_file,
    set_log_level,
    version,
)

from ._tensor import DLPackTensor  # noqa: E402 - the type of the signatures' tensors

__version__ = version()

# Every failure reaches Python code as an exception; the library's own warning lines about the
# same failures would report each one twice. So the log says only what no exception carries
# (a master's journal failing) unless LONGHAUL_LOG or set_log_level asks for more.
if "LONGHAUL_LOG" not in _os.environ:
    set_log_level("error")

__all__ = [
    "Closed",
    "Communicator",
    "DLPackTensor",
    "LocalGroup",
    "LonghaulError",
    "Master",
    "MasterUnreachable",
    "Mismatch",
    "NodeEvicted",
    "PeerFailure",
    "StateLayoutError",
    "SyncEngine",
    "SyncInfo",
    "Timeout",
    "Unsupported",
    "Work",
    "secret_from_file",
    "set_log_level",
    "version",
]
