"""RM object lifecycle as RM's resource server answers it (resserv, 580.142 for the codes).

Handles live per RM client; the model scopes clients by the replayed process
(``scope``), which is what handle remapping gives a real driver: two replayed
copies of one recorded client do not collide.  The answers, read from
``src/nvidia/src/libraries/resserv`` and ``src/kernel/rmapi``:

=====================================  ============================================
case                                   RM's status
=====================================  ============================================
alloc, the handle exists in the client NV_ERR_INSERT_DUPLICATE_NAME
alloc, root client handle taken        NV_ERR_INSERT_DUPLICATE_NAME
alloc, hObjectNew 0 or equal hClient   NV_ERR_INVALID_OBJECT_HANDLE
alloc, parent not in the client        NV_ERR_OBJECT_NOT_FOUND
alloc/free, no such client             NV_ERR_INVALID_OBJECT_HANDLE
free, no such object (client alive)    NV_OK  (RS_COMPATABILITY_MODE, set by the Linux build)
control, no such client                NV_ERR_INVALID_CLIENT
control, no such object                NV_ERR_OBJECT_NOT_FOUND
=====================================  ============================================

Statuses are names here; the model turns them into numbers with the
profile's status table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rmtrace.semantics import Category  # what the model needs to know about an RM class

NV_OK = "NV_OK"
DUPLICATE = "NV_ERR_INSERT_DUPLICATE_NAME"
BAD_HANDLE = "NV_ERR_INVALID_OBJECT_HANDLE"
NOT_FOUND = "NV_ERR_OBJECT_NOT_FOUND"
BAD_CLIENT = "NV_ERR_INVALID_CLIENT"


@dataclass(eq=False, slots=True)
class RmObject:
    handle: int
    category: Category
    parent: RmObject | None
    children: list[RmObject] = field(default_factory=list)
    extra: Any = None
    """Per-category state (a channel's ring address and host channel, ...)."""


@dataclass(eq=False, slots=True)
class RmClient:
    handle: int
    fd: int
    objects: dict[int, RmObject]
    root: RmObject


def _subtree(obj: RmObject) -> Iterator[RmObject]:
    """Children before parents, as RM frees them."""
    for child in list(obj.children):
        yield from _subtree(child)
    yield obj


class RmObjects:
    """Every RM client of the guest and its object tree."""

    def __init__(self) -> None:
        self.clients: dict[tuple[int, int], RmClient] = {}

    def alloc_client(self, scope: int, h_client: int, fd: int) -> tuple[str, RmClient | None]:
        key = (scope, h_client)
        if key in self.clients:
            return DUPLICATE, None
        root = RmObject(h_client, Category.ROOT, None)
        client = self.clients[key] = RmClient(h_client, fd, {h_client: root}, root)
        return NV_OK, client

    def alloc(self, scope: int, h_client: int, h_parent: int, h_object: int, category: Category,
              extra: Any = None) -> tuple[str, RmObject | None]:
        client = self.clients.get((scope, h_client))
        if client is None:
            return BAD_HANDLE, None
        if h_object == 0 or h_object == h_client:
            return BAD_HANDLE, None
        if h_object in client.objects:
            return DUPLICATE, None
        parent = client.objects.get(h_parent or h_client)
        if parent is None:
            return NOT_FOUND, None
        obj = RmObject(h_object, category, parent, extra=extra)
        parent.children.append(obj)
        client.objects[h_object] = obj
        return NV_OK, obj

    def free(self, scope: int, h_client: int, h_object: int) -> tuple[str, list[RmObject]]:
        """Free an object and everything under it (the whole client when h_object is the client)."""
        client = self.clients.get((scope, h_client))
        if client is None:
            return BAD_HANDLE, []
        obj = client.objects.get(h_object)
        if obj is None:
            return NV_OK, []
        freed = list(_subtree(obj))
        for gone in freed:
            del client.objects[gone.handle]
        if obj.parent is not None:
            obj.parent.children.remove(obj)
        else:
            del self.clients[(scope, h_client)]
        return NV_OK, freed

    def control(self, scope: int, h_client: int, h_object: int) -> tuple[str, RmObject | None]:
        client = self.clients.get((scope, h_client))
        if client is None:
            return BAD_CLIENT, None
        obj = client.objects.get(h_object)
        if obj is None:
            return NOT_FOUND, None
        return NV_OK, obj

    def clients_on_fd(self, scope: int, fd: int) -> list[RmClient]:
        return [c for (s, _h), c in self.clients.items() if s == scope and c.fd == fd]

    def free_client(self, scope: int, client: RmClient) -> list[RmObject]:
        return self.free(scope, client.handle, client.handle)[1]
