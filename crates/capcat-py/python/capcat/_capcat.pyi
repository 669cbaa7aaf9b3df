"""Type stubs of the native module (crates/capcat-py/src). Use the Python
classes of the package (capcat.Service, capcat.Reader) instead."""

from typing import Any, Dict, List, Optional, Sequence, Tuple

__version__: str

_Item = Tuple[str, str, str, Sequence[int], memoryview]

class NativeService:
    def __init__(
        self,
        catalog: str,
        store: str,
        spool: Optional[str],
        prefix: Optional[str],
        config_kind: str,
        config_text: Optional[str],
        lease_wait_s: float,
    ) -> None: ...
    def capture(
        self,
        tenant: str,
        experiment: str,
        run: str,
        step: int,
        model: str,
        hook: str,
        tags: Dict[str, str],
        captured_at_ns: Optional[int],
        items: List[_Item],
    ) -> List[str]: ...
    def flush(self, timeout_s: float) -> Tuple[int, float]: ...
    def snapshot_json(self) -> str: ...
    def closed(self) -> bool: ...
    def close(self) -> bool: ...

class NativeReader:
    def __init__(
        self,
        catalog: str,
        store: str,
        prefix: Optional[str],
        config_kind: str,
        config_text: Optional[str],
        tenant: str,
    ) -> None: ...
    def search_page(
        self,
        experiment: Optional[str],
        run: Optional[str],
        tensor_name: Optional[str],
        tensor_prefix: Optional[str],
        dtype: Optional[str],
        step_from: Optional[int],
        step_until: Optional[int],
        captured_from_ns: Optional[int],
        captured_until_ns: Optional[int],
        page_size: int,
        cursor: Optional[str],
    ) -> Tuple[List[Dict[str, Any]], int, Optional[str]]: ...
    def pin(self) -> int: ...
    def get(
        self, ids: List[str], pinned: Optional[int]
    ) -> Tuple[List[Dict[str, Any]], List[str], int]: ...
    def hydrate(
        self, ids: List[str], pinned: Optional[int]
    ) -> Tuple[List[Tuple[Dict[str, Any], bytearray]], List[str], int]: ...
