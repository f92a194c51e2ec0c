"""Files and directories only the invoker's own user may read: the state directory, the
embedded store, generated credentials.

Actions run on the same machine; whatever the invoker keeps on disk must not be readable by
them or by other local users. Modes are set on existing paths too: a state directory made by
an older version (0755, a 0644 store) is tightened at the next start.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: str | os.PathLike[str], mode: int = DIR_MODE) -> Path:
    """``path`` (and missing parents) created, and ``path`` itself set to ``mode``.

    ``mode`` 0o711 lets another user traverse it to a path it knows (a container directory
    for ``--action-user``) without listing or reading anything else."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True, mode=mode)
    os.chmod(p, mode)
    return p


def private_file(path: str | os.PathLike[str]) -> Path:
    """An existing file set to 0600 (a missing one is left missing)."""
    p = Path(path)
    if p.exists():
        os.chmod(p, FILE_MODE)
    return p


def write_private(path: str | os.PathLike[str], text: str) -> Path:
    """``text`` written to a file created 0600 (never readable by others, not even briefly)."""
    p = Path(path)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    return p


def kept_secret(path: str | os.PathLike[str], nbytes: int = 24) -> str:
    """The secret stored in ``path``, or a new random one written there (0600): the same
    secret across restarts, so scripts can read it from the file."""
    p = Path(path)
    if p.is_file():
        text = private_file(p).read_text().strip()
        if text:
            return text
    p.parent.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    secret = secrets.token_urlsafe(nbytes)
    write_private(p, secret + "\n")
    return secret
