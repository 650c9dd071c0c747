"""Reading the files users hand us: bounded in size, UTF-8, one clear error when they are not."""

from __future__ import annotations

from pathlib import Path

from emews.errors import ConfigError

#: the largest file read as configuration or data (bytes)
MAX_FILE_BYTES = 4 * 2**20


def read_text(path: Path, *, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of ``path``; a file that is too big, unreadable or not UTF-8 is a ConfigError."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", file=path) from None
    if len(raw) > limit:
        raise ConfigError(f"file is larger than the limit of {limit // 2**20} MiB", file=path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start}",
                          file=path, allowed="UTF-8 encoded text") from None
