"""Options a selection (or an engine's format config) gives a format reader.

Keys are read case-insensitively and accept Drill's spellings (``extractHeader``, ``fieldDelimiter``).
Unknown keys are an error naming the known ones, so a typo does not silently change the outcome.

>>> ReaderOptions.from_mapping({"onError": "skip", "header": False})
ReaderOptions(on_error='skip', header=False, delimiter=',', quote='"')
>>> ReaderOptions.from_mapping({"onEror": "skip"}, where="selection of scan 1")
Traceback (most recent call last):
...
engine.errors.StorageError: selection of scan 1: unknown reader option 'onEror'; known options are delimiter, header, onError, quote
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from engine.errors import StorageError

OnError = Literal["fail", "skip"]

_ALIASES: dict[str, str] = {
    "onerror": "on_error",
    "on_error": "on_error",
    "header": "header",
    "extractheader": "header",
    "delimiter": "delimiter",
    "fielddelimiter": "delimiter",
    "quote": "quote",
}
_KNOWN = ("delimiter", "header", "onError", "quote")
_ON_ERROR = {"fail": "fail", "error": "fail", "skip": "skip"}


@dataclass(frozen=True)
class ReaderOptions:
    """How to read: ``on_error`` (``fail`` or ``skip`` bad records, counting them), and for
    delimited text ``header`` (None: the format's default), ``delimiter`` and ``quote``."""

    on_error: OnError = "fail"
    header: bool | None = None
    delimiter: str = ","
    quote: str = '"'

    @property
    def skip_errors(self) -> bool:
        return self.on_error == "skip"

    @staticmethod
    def from_mapping(
        options: Mapping[str, Any] | None, *, where: str = "selection"
    ) -> ReaderOptions:
        """Options from a plan's mapping; see the module docstring."""
        return ReaderOptions().updated(options, where=where)

    def updated(
        self, options: Mapping[str, Any] | None, *, where: str = "selection"
    ) -> ReaderOptions:
        """These options with the keys of ``options`` laid over them."""
        if not options:
            return self
        changes: dict[str, Any] = {}
        for key, value in options.items():
            name = _ALIASES.get(str(key).lower())
            if name is None:
                raise StorageError(
                    f"{where}: unknown reader option '{key}'; known options are {', '.join(_KNOWN)}"
                )
            changes[name] = _check(name, key, value, where)
        return replace(self, **changes)


def is_option_key(key: str) -> bool:
    """Whether ``key`` names a reader option (selections may give them at top level)."""
    return key.lower() in _ALIASES


def _check(name: str, key: str, value: Any, where: str) -> Any:
    if name == "on_error":
        mode = _ON_ERROR.get(str(value).lower())
        if mode is None:
            raise StorageError(f"{where}: {key} must be 'fail' or 'skip', not {value!r}")
        return mode
    if name == "header":
        if not isinstance(value, bool):
            raise StorageError(f"{where}: {key} must be true or false, not {value!r}")
        return value
    if not isinstance(value, str) or len(value) != 1:
        raise StorageError(f"{where}: {key} must be a single character, not {value!r}")
    if value in "\r\n":
        raise StorageError(f"{where}: {key} cannot be a line break")
    return value
