"""Capcat from Python: capture tensors into checksummed packs in an object
store, indexed in a ClickHouse catalog, and read them back verified.

>>> import numpy as np, capcat
>>> with capcat.Service(catalog="embedded:data/catalog", store="local:data/store",
...                     spool="data/spool") as service:
...     ids = service.capture("acme", "run-1", 0, {"h": np.ones((2, 3), "f4")})
...     service.flush()
>>> reader = capcat.Reader("acme", catalog="embedded:data/catalog", store="local:data/store")
>>> [page.captures for page in reader.search(run="run-1")]

See docs/python.md in the repository.
"""

from . import errors
from ._capcat import __version__
from ._tensors import DTYPES
from .errors import (
    CapcatError,
    CatalogError,
    CaptureError,
    ClosedError,
    ConfigError,
    FlushError,
    IntegrityError,
    LeaseHeldError,
    NotFoundError,
    QueryError,
    SpoolBusyError,
    SpoolError,
    StoreError,
)
from .reader import Capture, Page, Reader
from .service import FlushReport, Service

__all__ = [
    "DTYPES",
    "CapcatError",
    "Capture",
    "CatalogError",
    "CaptureError",
    "ClosedError",
    "ConfigError",
    "FlushError",
    "FlushReport",
    "IntegrityError",
    "LeaseHeldError",
    "NotFoundError",
    "Page",
    "QueryError",
    "Reader",
    "Service",
    "SpoolBusyError",
    "SpoolError",
    "StoreError",
    "__version__",
    "errors",
]
