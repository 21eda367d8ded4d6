"""The client ids a replay trace was planned with: read by the session fold and the call table alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def client_ids(meta: Mapping[str, Any]) -> dict[int, str]:
    """pid -> client id of the clients a replay trace was made for: its plan's names, so that every
    reader calls a client what the replay's table called it.  None for a recording (clients are
    numbered by their first appearance)."""
    if meta.get("backend") != "replay":
        return {}
    clients = (meta.get("replay") or {}).get("clients") or []
    return {c["pid"]: c["id"] for c in clients if isinstance(c, dict) and "pid" in c and "id" in c}
