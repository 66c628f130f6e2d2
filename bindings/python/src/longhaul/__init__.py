"""longhaul: fault-tolerant, low-bandwidth collectives for training across the internet.

The classes and errors come from the C library (``longhaul._longhaul``, a nanobind extension);
tensors cross by DLPack, zero-copy. Importing this package imports neither torch nor numpy:
``longhaul.torch`` (DiLoCo over plain and FSDP2 modules) imports torch when it is imported.
docs/python.md is the guide.
"""

from ._longhaul import (
    Closed,
    Communicator,
    LonghaulError,
    Master,
    NodeEvicted,
    PeerFailure,
    StateLayoutError,
    SyncEngine,
    SyncInfo,
    Timeout,
    Unsupported,
    Work,
    set_log_level,
    version,
)

__version__ = version()

__all__ = [
    "Closed",
    "Communicator",
    "LonghaulError",
    "Master",
    "NodeEvicted",
    "PeerFailure",
    "StateLayoutError",
    "SyncEngine",
    "SyncInfo",
    "Timeout",
    "Unsupported",
    "Work",
    "set_log_level",
    "version",
]
