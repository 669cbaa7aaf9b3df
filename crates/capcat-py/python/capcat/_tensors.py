"""Arrays and tensors to dtype, shape and little-endian bytes, and back.

Nothing passes through a float conversion: a bf16 or f16 value is carried
as its bits, so a NaN payload, a -0.0 or a subnormal reads back as the
very value captured.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from .errors import CaptureError

try:  # numpy has no bfloat16 of its own
    import ml_dtypes

    _BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    _BFLOAT16 = None

_FROM_NUMPY = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
}

_TO_NUMPY = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("bool"),
}
if _BFLOAT16 is not None:
    _TO_NUMPY["BF16"] = _BFLOAT16

_TORCH_NAMES = {
    "torch.float64": "F64",
    "torch.float32": "F32",
    "torch.float16": "F16",
    "torch.bfloat16": "BF16",
    "torch.int64": "I64",
    "torch.int32": "I32",
    "torch.int16": "I16",
    "torch.int8": "I8",
    "torch.uint8": "U8",
    "torch.bool": "BOOL",
}

DTYPES = tuple(_FROM_NUMPY.values())


def _is_torch(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach")


def _unknown_dtype(name: str, dtype: Any) -> CaptureError:
    return CaptureError(
        f"tensor {name!r}: dtype {dtype} is not one capcat stores ({', '.join(DTYPES)})",
        "UnknownDtype",
        tensor=name,
    )


def to_raw(name: str, value: Any) -> Tuple[str, Tuple[int, ...], memoryview]:
    """The capcat dtype name, shape and bytes (a ``B``-format view, no copy
    where the input is already contiguous little-endian) of one tensor."""
    if _is_torch(value):
        return _torch_to_raw(name, value)
    array = np.asarray(value)
    dtype = _FROM_NUMPY.get(array.dtype.name)
    if dtype is None:
        raise _unknown_dtype(name, array.dtype)
    shape = tuple(int(d) for d in array.shape)
    if array.dtype.byteorder == ">":
        # Value-preserving: the bytes change, the numbers do not.
        array = array.astype(array.dtype.newbyteorder("<"))
    flat = np.ascontiguousarray(array).reshape(-1)
    return dtype, shape, memoryview(flat.view(np.uint8))


def _torch_to_raw(name: str, tensor: Any) -> Tuple[str, Tuple[int, ...], memoryview]:
    import torch

    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        raise CaptureError(
            f"tensor {name!r} is on {tensor.device}; move it to the CPU first "
            "(capcat copies host memory only)",
            "NotOnCpu",
            tensor=name,
        )
    dtype = _TORCH_NAMES.get(str(tensor.dtype))
    if dtype is None:
        raise _unknown_dtype(name, tensor.dtype)
    shape = tuple(int(d) for d in tensor.shape)
    flat = tensor.contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy()
    return dtype, shape, memoryview(raw)


def from_raw(dtype: str, shape: Tuple[int, ...], payload: bytearray) -> np.ndarray:
    """The numpy array of verified payload bytes (no copy: the array owns
    ``payload``)."""
    np_dtype = _TO_NUMPY.get(dtype)
    if np_dtype is None:
        raise CaptureError(
            f"dtype {dtype} has no numpy equivalent here (install ml_dtypes for BF16)",
            "UnknownDtype",
        )
    return np.frombuffer(payload, dtype=np_dtype).reshape(shape)


def to_torch(array: np.ndarray) -> Any:
    """A torch tensor holding the same bits as ``array`` (shares memory)."""
    import torch

    if _BFLOAT16 is not None and array.dtype == _BFLOAT16:
        bits = torch.from_numpy(np.ascontiguousarray(array).view(np.int16))
        return bits.view(torch.bfloat16)
    return torch.from_numpy(array)
