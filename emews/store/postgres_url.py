"""Where an experiment's store is: SQLite in the experiment directory (the default) or a
PostgreSQL database named by a URL (the workflow's ``store.url`` or ``EMEWS_STORE_URL``), and how long a
pool's claim on a task lasts there (``store.lease``).

A URL never holds a password: the secret comes from the environment (``PGPASSWORD``), a
``~/.pgpass`` file or a service file (``?service=NAME``), as libpq reads them, so that nothing
written to the workflow, the experiment directory or a log reveals it.
"""

from __future__ import annotations

import os
import re
import uuid
from urllib.parse import parse_qsl, unquote, urlsplit

#: seconds a pool's claim on a task lasts without a heartbeat when the workflow's ``store.lease`` says none
DEFAULT_LEASE = 60.0
#: the environment variable naming the store when the workflow does not
URL_VARIABLE = "EMEWS_STORE_URL"
#: what a store URL may be (for messages)
URL_ALLOWED = "postgresql://[user@]host[:port]/database[?sslmode=...]"
_SCHEMES = ("postgresql", "postgres")
#: query keys that carry a secret (libpq decodes the percent-escapes of a key: ``%70assword`` too),
#: in any case: libpq refuses ``Password=``, and its message would quote the URL with the secret
_SECRET_KEYS = frozenset(("password", "sslpassword"))


def check_url(url: str) -> str:
    """``url`` if it is a PostgreSQL URL without a password; else :class:`ValueError` saying why."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("is empty")
    try:
        parts = urlsplit(url)
        port = parts.port  # a bad port raises here
    except ValueError as exc:
        raise ValueError(f"is not a URL ({exc})") from None
    if parts.scheme not in _SCHEMES:
        raise ValueError(f"must start with postgresql:// (got {url.split(':', 1)[0]!r})")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))  # decoded, as libpq reads it
    if parts.password is not None or _SECRET_KEYS & {key.strip().lower() for key in query}:
        raise ValueError("holds a password: put it in PGPASSWORD, ~/.pgpass or a service file instead")
    if any("=" in value for value in (unquote(parts.path), query.get("dbname", ""))):
        raise ValueError("names a database with '=' in it (a connection string inside the URL is not allowed)")
    if parts.fragment:
        raise ValueError("has a '#' part, which a store URL cannot have")
    if not parts.path.strip("/") and not {"service", "dbname"} & query.keys():
        raise ValueError("names no database (postgresql://host/DATABASE)")
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"port {port} is out of range")
    return url


def chosen_url(workflow_url: str | None) -> str | None:
    """The store URL of a new experiment: the workflow's, else :data:`URL_VARIABLE` (``None``: SQLite)."""
    return workflow_url or os.environ.get(URL_VARIABLE) or None


def new_schema(name: str) -> str:
    """A fresh PostgreSQL schema name for the experiment called ``name`` (readable, unique)."""
    slug = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")[:40] or "experiment"
    return f"emews_{slug}_{uuid.uuid4().hex[:10]}"


def is_url(location: str) -> bool:
    """Whether a store location is a PostgreSQL URL (else an SQLite file)."""
    return location.startswith(tuple(f"{s}://" for s in _SCHEMES))


def lease_seconds(lease: float | None) -> float:
    """A workflow's ``store.lease`` (docs/postgres.md, "Pools"), or its default: :data:`DEFAULT_LEASE`."""
    return DEFAULT_LEASE if lease is None else lease
