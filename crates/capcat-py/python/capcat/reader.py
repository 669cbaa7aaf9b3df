"""``capcat.Reader``: one tenant's searches, lookups and verified payloads."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _capcat
from ._config import ConfigArg, config_text
from ._tensors import DTYPES, from_raw, to_torch
from .errors import NotFoundError, QueryError

IdArg = Union[str, uuid.UUID]


@dataclass(frozen=True)
class Capture:
    """One capture as the catalog describes it."""

    capture_id: uuid.UUID
    tenant_id: str
    experiment_id: str
    run_id: str
    captured_at_ns: int
    step: int
    tensor_name: str
    dtype: str
    shape: Tuple[int, ...]
    index_version: int
    store_id: str
    pack_id: uuid.UUID
    payload_offset: int
    payload_length: int
    payload_sha256: str
    summary: Dict[str, float]

    @classmethod
    def _from(cls, row: Dict[str, Any]) -> "Capture":
        row = dict(row)
        row["capture_id"] = uuid.UUID(row["capture_id"])
        row["pack_id"] = uuid.UUID(row["pack_id"])
        row["shape"] = tuple(row["shape"])
        return cls(**row)


@dataclass(frozen=True)
class Page:
    """One page of a search, read at version ``pinned``."""

    captures: List[Capture]
    pinned: int
    cursor: Optional[str]
    """Where the next page starts (``None`` on the last page); pass it as
    ``search(cursor=...)`` to resume, even from another process."""


def _ids(ids: Iterable[IdArg]) -> List[str]:
    return [str(i) for i in ids]


class Reader:
    """A tenant's reads of a catalog and its store (opened read-only: a
    mistyped ``embedded:`` or ``local:`` path is an error, not a new empty
    catalog).

    Every read is of one published version: a search pins the version at its
    first page and every later page is read there, so captures published
    meanwhile never appear half-way through.
    """

    def __init__(
        self,
        tenant: str,
        catalog: str = "embedded:capcat-data/catalog",
        store: str = "local:capcat-data/store",
        prefix: Optional[str] = None,
        config: ConfigArg = None,
    ) -> None:
        kind, text = config_text(config)
        self.tenant = tenant
        self._native = _capcat.NativeReader(catalog, store, prefix, kind, text, tenant)

    def search(
        self,
        *,
        experiment: Optional[str] = None,
        run: Optional[str] = None,
        tensor_name: Optional[str] = None,
        tensor_prefix: Optional[str] = None,
        dtype: Optional[str] = None,
        step_from: Optional[int] = None,
        step_until: Optional[int] = None,
        captured_from_ns: Optional[int] = None,
        captured_until_ns: Optional[int] = None,
        page_size: int = 100,
        cursor: Optional[str] = None,
    ) -> Iterator[Page]:
        """The pages of captures matching every filter given (steps and
        times inclusive), in capture-key order, all at one pinned version."""
        if dtype is not None:
            dtype = dtype.upper()
            if dtype not in DTYPES:
                raise QueryError(
                    f"dtype {dtype!r} is not one capcat stores ({', '.join(DTYPES)})",
                    "UnknownDtype",
                    value=dtype,
                )
        while True:
            rows, pinned, cursor = self._native.search_page(
                experiment,
                run,
                tensor_name,
                tensor_prefix,
                dtype,
                step_from,
                step_until,
                captured_from_ns,
                captured_until_ns,
                page_size,
                cursor,
            )
            yield Page([Capture._from(r) for r in rows], pinned, cursor)
            if cursor is None:
                return

    def captures(self, **filters: Any) -> Iterator[Capture]:
        """Every capture of :meth:`search` with these filters, page by page."""
        for page in self.search(**filters):
            yield from page.captures

    def pin(self) -> int:
        """The published version a read started now sees."""
        return self._native.pin()

    def get(
        self, ids: Iterable[IdArg], *, pinned: Optional[int] = None, missing_ok: bool = False
    ) -> Dict[uuid.UUID, Capture]:
        """The captures with these ids at ``pinned`` (the current version
        when ``None``). Raises :class:`capcat.errors.NotFoundError` naming
        the ids not found, unless ``missing_ok``."""
        rows, missing, at = self._native.get(_ids(ids), pinned)
        _check_missing(missing, at, missing_ok)
        return {c.capture_id: c for c in map(Capture._from, rows)}

    def hydrate(
        self, ids: Iterable[IdArg], *, pinned: Optional[int] = None, missing_ok: bool = False
    ) -> Dict[uuid.UUID, np.ndarray]:
        """The payloads of these captures as numpy arrays (BF16 as
        ``ml_dtypes.bfloat16``), each verified byte for byte against the
        SHA-256 the catalog recorded (:class:`capcat.errors.IntegrityError`
        otherwise)."""
        found, missing, at = self._native.hydrate(_ids(ids), pinned)
        _check_missing(missing, at, missing_ok)
        out = {}
        for row, payload in found:
            out[uuid.UUID(row["capture_id"])] = from_raw(row["dtype"], tuple(row["shape"]), payload)
        return out

    def to_torch(
        self, ids: Iterable[IdArg], *, pinned: Optional[int] = None, missing_ok: bool = False
    ) -> Dict[uuid.UUID, Any]:
        """:meth:`hydrate` as torch tensors (torch must be installed)."""
        return {
            i: to_torch(a)
            for i, a in self.hydrate(ids, pinned=pinned, missing_ok=missing_ok).items()
        }


def _check_missing(missing: List[str], pinned: int, missing_ok: bool) -> None:
    if missing and not missing_ok:
        raise NotFoundError(
            f"{len(missing)} capture(s) not found at pinned version {pinned}: "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else ""),
            "NotFound",
            missing=[uuid.UUID(m) for m in missing],
            pinned=pinned,
        )
