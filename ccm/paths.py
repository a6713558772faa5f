"""Where a knowledge root is, and where its daemon listens: kept apart from the store so
that a hook can find the daemon without importing the rest of ccm."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

ENV_HOME = "CCM_HOME"
DEFAULT_ROOT = "~/.knowledge"
SOCKET_NAME = "daemon.sock"
MAX_SOCKET_PATH = 100  # bytes: an AF_UNIX path longer than about 104-108 cannot be bound


def resolve_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The knowledge root: `root` if given, else ``$CCM_HOME``, else ``~/.knowledge``."""
    if root is not None and str(root) != "":
        chosen = Path(root)
    elif os.environ.get(ENV_HOME):
        chosen = Path(os.environ[ENV_HOME])
    else:
        chosen = Path(DEFAULT_ROOT)
    return chosen.expanduser().absolute()


def socket_path(root: Path) -> Path:
    """The Unix socket the daemon of `root` answers on: ``.ccm/daemon.sock`` under it,
    or, when that path is too long to bind, one in the temporary folder named after the
    root (and the user, whom it is private to)."""
    path = root / ".ccm" / SOCKET_NAME
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha1(os.fsencode(root)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"ccm-{os.getuid()}-{digest}.sock"
