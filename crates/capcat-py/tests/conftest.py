"""Fixtures of the Python package's tests: a directory per test for the
embedded catalog, the local store and the spool, and the S3 test server.

The engines are real: the embedded catalog is libchdb (``CAPCAT_LIBCHDB``,
or fetched into the cache), the S3 store is the workspace's S3 test server
(``CAPCAT_S3_SERVER_BIN``, built by ``cargo xtask build-s3-server``).
``cargo xtask python`` sets both. With ``CAPCAT_REQUIRE_ENGINES=1`` a
missing server fails the tests instead of skipping them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import pytest

ACCESS_KEY = "capcat-python-access"
SECRET_KEY = "capcat-python-secret"


@dataclass
class Place:
    """Where one test's service and reader live."""

    root: Path
    catalog: str
    store: str
    spool: Path
    prefix: str

    def service_args(self) -> dict:
        return dict(catalog=self.catalog, store=self.store, spool=self.spool, prefix=self.prefix)

    def reader_args(self) -> dict:
        return dict(catalog=self.catalog, store=self.store, prefix=self.prefix)


@pytest.fixture(scope="session")
def catalog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one embedded catalog of the test process: libchdb serves one data
    path per process, so tests share it and each has its own prefix."""
    return tmp_path_factory.mktemp("catalog")


@pytest.fixture
def place(tmp_path: Path, catalog_dir: Path, request: pytest.FixtureRequest) -> Place:
    """The shared embedded catalog under a prefix of the test's own, and a
    local store and spool of its own."""
    prefix = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    return Place(
        root=tmp_path,
        catalog=f"embedded:{catalog_dir}",
        store=f"local:{tmp_path / 'store'}",
        spool=tmp_path / "spool",
        prefix=prefix,
    )


@dataclass
class S3Server:
    """A running S3 test server and the bucket made for one test."""

    endpoint: str
    bucket: str
    root: Path

    @property
    def store(self) -> str:
        return f"s3://{self.bucket}?endpoint={self.endpoint}"


@pytest.fixture
def s3_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    binary = os.environ.get("CAPCAT_S3_SERVER_BIN")
    if not binary:
        if os.environ.get("CAPCAT_REQUIRE_ENGINES") == "1":
            pytest.fail("CAPCAT_S3_SERVER_BIN is not set (cargo xtask build-s3-server)")
        pytest.skip("CAPCAT_S3_SERVER_BIN is not set (cargo xtask build-s3-server)")
    root = tmp_path / "s3"
    bucket = "capcat-python"
    (root / bucket).mkdir(parents=True)
    child = subprocess.Popen(
        [binary, "--root", str(root), "--port", "0",
         "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # The server prints the address it bound before it accepts anything.
        address = child.stdout.readline().strip()
        assert address, "the S3 test server exited before printing its address"
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        yield S3Server(endpoint=f"http://{address}", bucket=bucket, root=root)
    finally:
        child.kill()
        child.wait()


class StalledServer:
    """A TCP server on 127.0.0.1 that accepts connections, reads what is
    sent, and never answers: a catalog or store that hangs."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.port = self._socket.getsockname()[1]
        self._connections: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self._socket.settimeout(0.1)
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except (socket.timeout, OSError):
                continue
            self._connections.append(connection)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for connection in self._connections:
            connection.close()
        self._socket.close()


@pytest.fixture
def stalled(monkeypatch: pytest.MonkeyPatch) -> Iterator[StalledServer]:
    # Credentials, so an S3 store pointed at it gets as far as the request.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    server = StalledServer()
    yield server
    server.close()


class Ticker:
    """A thread that counts while it gets the GIL: a count that stops
    growing while another thread waits in capcat means capcat held the
    GIL."""

    def __init__(self, interval: float = 0.01) -> None:
        self.ticks = 0
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.ticks += 1

    def __enter__(self) -> "Ticker":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def capcat_bin() -> Optional[str]:
    """The `capcat` binary the kill test drains with."""
    return os.environ.get("CAPCAT_BIN")
