"""Every error ccm raises on purpose, in one place.

Each message names what went wrong, where (file and line when there is one) and how to
fix it. The CLI turns `CCMError` into ``Error: ...`` on stderr and exit code 1, and
`UsageError` into exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class CCMError(Exception):
    """A failure a user can act on; the message says how."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # whole across a process boundary (a task's error, see `ccm.executors`): the
        # default would call __init__ again with the one string of `args`
        return (_restored, (type(self), dict(self.__dict__), self.args))


def _restored(kind: type[CCMError], state: dict[str, Any], args: tuple[Any, ...]) -> CCMError:
    error = kind.__new__(kind)
    error.__dict__.update(state)
    error.args = args
    return error


class UsageError(CCMError):
    """The command was called wrongly (exit code 2)."""


class InvalidSessionId(UsageError):
    """A session id that could escape the knowledge root or is not a usable name."""


class OutsideRoot(CCMError):
    """A path under the knowledge root that leads out of it (a symlink)."""


class UnknownSession(CCMError):
    """The session does not exist under the knowledge root."""


class FormatError(CCMError):
    """An input whose format ccm cannot recognise or parse as a whole."""


class ConfigError(CCMError):
    """config.yaml is unreadable or has a wrong key or value."""


class SchemaError(CCMError):
    """A file ccm reads does not match its JSON Schema."""

    def __init__(
        self, path: Path | str, line: int | None, message: str, hint: str | None = None
    ) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}", hint)
