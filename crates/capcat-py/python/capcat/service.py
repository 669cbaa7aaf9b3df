"""``capcat.Service``: capture tensors into the storage service."""

from __future__ import annotations

import json
import os
import uuid
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Union

from . import _capcat
from ._config import ConfigArg, config_text
from ._tensors import to_raw

PathArg = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class FlushReport:
    """What a flush made queryable."""

    packs: int
    """Packs sealed before the flush that are now queryable."""
    elapsed_s: float
    """How long the flush took."""


class Service:
    """The storage service, in this process: captures are sealed into packs
    in the spool, uploaded to the store and indexed into the catalog on
    background threads.

    ``catalog``: ``"embedded:<path>"`` (ClickHouse in this process) or
    ``"http(s)://host:port"``. ``store``: ``"local:<dir>"`` or
    ``"s3://bucket?endpoint=URL[&region=R]"`` (credentials from
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``). ``spool``: the spool
    directory (the configuration's ``spool_dir`` when ``None``, else
    ``capcat-data/spool``, the command's); ``prefix``: the catalog prefix (tables and object keys);
    ``config``: a TOML file or a mapping of the same keys. The explicit
    arguments beat the configuration. ``lease_wait``: how long to wait when
    the catalog's publisher lease is held by another holder (a killed
    process's lease lives until its TTL passes); 0 refuses at once with
    :class:`capcat.errors.LeaseHeldError`.

    Every call that waits releases the GIL. Use it as a context manager, or
    call :meth:`close`: a service dropped without it stops at once without
    its final flush (what it sealed stays in the spool for the next
    service or ``capcat drain``) and its lease expires on its own.
    """

    def __init__(
        self,
        catalog: str = "embedded:capcat-data/catalog",
        store: str = "local:capcat-data/store",
        spool: Optional[PathArg] = None,
        prefix: Optional[str] = None,
        config: ConfigArg = None,
        lease_wait: float = 60.0,
    ) -> None:
        kind, text = config_text(config)
        spool_path = None if spool is None else os.fspath(spool)
        self._native = _capcat.NativeService(
            catalog, store, spool_path, prefix, kind, text, float(lease_wait)
        )

    def capture(
        self,
        tenant: str,
        run: str,
        step: int,
        tensors: Mapping[str, Any],
        *,
        experiment: str = "default",
        model: str = "",
        hook: str = "",
        module_paths: Optional[Mapping[str, str]] = None,
        tags: Optional[Mapping[str, str]] = None,
        captured_at_ns: Optional[int] = None,
    ) -> Dict[str, uuid.UUID]:
        """Captures ``tensors`` (name -> numpy array or CPU torch tensor) at
        ``step`` of ``run``; returns each tensor's capture id.

        Every tensor is checked before any is appended: a refused capture
        (:class:`capcat.errors.CaptureError`) leaves nothing behind. The
        bytes are copied, so the caller may reuse its arrays at once.
        ``module_paths`` gives a tensor's module path (its name when absent).
        """
        module_paths = module_paths or {}
        items = []
        for name, value in tensors.items():
            dtype, shape, data = to_raw(name, value)
            items.append((name, module_paths.get(name, name), dtype, list(shape), data))
        ids = self._native.capture(
            tenant,
            experiment,
            run,
            step,
            model,
            hook,
            dict(tags or {}),
            captured_at_ns,
            items,
        )
        return {name: uuid.UUID(text) for (name, *_), text in zip(items, ids)}

    def flush(self, timeout: float = 60.0) -> FlushReport:
        """Returns once everything captured before the call is queryable.

        Raises :class:`capcat.errors.FlushError` when ``timeout`` seconds
        pass first (``pending`` packs are still on their way and nothing is
        lost) or when packs were set aside.
        """
        packs, elapsed = self._native.flush(float(timeout))
        return FlushReport(packs=packs, elapsed_s=elapsed)

    def snapshot(self) -> Dict[str, Any]:
        """The service's counters: packs uploaded and indexed, the spool's
        backlog, the lease, the last error, time per stage."""
        return json.loads(self._native.snapshot_json())

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._native.closed()

    def close(self) -> bool:
        """Seals, flushes (within ``close_flush_timeout_s``), stops and
        releases the lease; returns whether the lease was released. Raises
        the final flush's :class:`capcat.errors.FlushError` after the
        service has stopped. A second call does nothing."""
        return self._native.close()

    def __enter__(self) -> "Service":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        # An exception is already on its way: closing still runs, and a
        # flush error is reported beside it instead of replacing it.
        try:
            self.close()
        except Exception as error:  # noqa: BLE001 - reported, not swallowed
            warnings.warn(
                f"capcat: closing after {exc_type.__name__}: {error}",
                RuntimeWarning,
                stacklevel=2,
            )
