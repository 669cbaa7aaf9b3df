"""The exceptions of the capcat package.

Every error the Rust side reports arrives as one of these classes. Each
carries ``kind`` (the Rust error's variant, e.g. ``"NotDrained"``), the
message the Rust error prints, and the fields a caller can act on, both
as attributes and in ``fields``.
"""

from __future__ import annotations

from typing import Any, Dict


class CapcatError(Exception):
    """The base of every capcat error."""

    kind: str
    message: str
    fields: Dict[str, Any]

    def __init__(self, message: str, kind: str = "", **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.fields = dict(fields)
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self):  # picklable across processes, fields included
        return (_rebuild, (type(self), self.message, self.kind, self.fields))


def _rebuild(cls, message, kind, fields):
    return cls(message, kind, **fields)


class ConfigError(CapcatError, ValueError):
    """A location, configuration key or argument is refused (``field``,
    ``value`` where one field is at fault)."""


class CatalogError(CapcatError):
    """The catalog could not be opened, refused a statement, or is not
    reachable. ``kind == "NoSchema"``: nothing was captured under the
    prefix yet."""


class LeaseHeldError(CatalogError):
    """Another publisher (``holder``) holds the catalog's publisher lease: a
    running service on the same catalog and prefix, or one that was killed
    and whose lease has not expired yet (``capcat drain`` waits for it)."""


class QueryError(CapcatError, ValueError):
    """A read's arguments are refused: a page size, a cursor of another
    query, a malformed id, more bytes than ``read_byte_limit``."""


class StoreError(CapcatError):
    """The object store could not be opened or read (``capture_id`` and
    ``pack_id`` for a failed read)."""


class SpoolError(CapcatError):
    """The spool directory could not be opened or written."""


class SpoolBusyError(SpoolError):
    """Another live process owns the spool directory."""


class CaptureError(CapcatError, ValueError):
    """A capture was refused (``tensor`` names the tensor at fault); nothing
    of that capture was appended."""


class FlushError(CapcatError):
    """A flush did not make everything queryable. ``kind == "NotDrained"``:
    the timeout passed with ``pending`` packs still on their way (they stay
    in the spool or the store, and a later flush or ``capcat drain``
    finishes them); ``kind == "SetAside"``: the packs in ``set_aside`` were
    refused and kept aside."""


class ClosedError(CapcatError):
    """The service is closed."""


class NotFoundError(CapcatError, LookupError):
    """Some capture ids asked for are not in the catalog at the pinned
    version (``missing``, ``pinned``)."""


class IntegrityError(CapcatError):
    """Bytes read back do not match what the catalog recorded for
    ``capture_id``: nothing unverified is ever returned."""


__all__ = [
    "CapcatError",
    "CatalogError",
    "CaptureError",
    "ClosedError",
    "ConfigError",
    "FlushError",
    "IntegrityError",
    "LeaseHeldError",
    "NotFoundError",
    "QueryError",
    "SpoolBusyError",
    "SpoolError",
    "StoreError",
]
