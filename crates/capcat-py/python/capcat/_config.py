"""The ``config=`` argument: a TOML file, a mapping, or nothing."""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping, Optional, Tuple, Union

from .errors import ConfigError

ConfigArg = Union[None, str, "os.PathLike[str]", Mapping[str, Any]]


def _toml_value(key: str, value: Any) -> str:
    # bool before int: a bool is an int in Python, and not in TOML.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # TOML spells the values JSON cannot: the service then refuses a
        # NaN or an infinity by name instead of a parser error.
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (str, os.PathLike)):
        # A JSON string is a TOML basic string: same quotes, same escapes.
        return json.dumps(os.fspath(value))
    raise ConfigError(
        f"config key {key!r}: {type(value).__name__} is not a TOML scalar "
        "(bool, int, float, str or path)",
        "Type",
        field=key,
    )


def mapping_to_toml(config: Mapping[str, Any]) -> str:
    """The TOML document of a flat mapping of configuration keys (a key set
    to ``None`` is left out, so it keeps its default)."""
    lines = []
    for key, value in config.items():
        if not isinstance(key, str):
            raise ConfigError(f"config key {key!r} is not a string", "Type")
        if value is None:
            continue
        lines.append(f"{json.dumps(key)} = {_toml_value(key, value)}")
    return "\n".join(lines) + "\n"


def config_text(config: ConfigArg) -> Tuple[str, Optional[str]]:
    """(kind, text) as the native module takes them: ``("default", None)``
    or ``("toml", text)``. The keys are those of the TOML configuration
    file (docs/operations.md); unknown keys are refused."""
    if config is None:
        return "default", None
    if isinstance(config, Mapping):
        return "toml", mapping_to_toml(config)
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        try:
            with open(path, encoding="utf-8") as file:
                return "toml", file.read()
        except OSError as error:
            raise ConfigError(f"config file {path}: {error}", "Read", path=path) from None
    raise ConfigError(
        f"config must be a path to a TOML file or a mapping, not {type(config).__name__}",
        "Type",
    )
