"""The RM object tree per client: class names, handles, stable names, lifetimes.

Selecting an object lights up its lanes and narrows the events to records
naming it or anything below it.
"""

from __future__ import annotations

from textual import on
from textual.binding import Binding
from textual.widgets import Tree

from rmtrace.tui.messages import ObjectCleared, ObjectSelected
from rmtrace.tui.view import ObjectNode
from rmtrace.tui.workspace import Workspace


class ObjectsTree(Tree[ObjectNode | str]):
    """Clients at the top, each with its objects nested by parent handle."""

    BINDINGS = [
        Binding("escape", "clear", "Clear selection"),
    ]

    def __init__(self, workspace: Workspace, *, id: str | None = None) -> None:
        super().__init__("objects", id=id)
        self.workspace = workspace
        self.show_root = False

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        run = self.workspace.run
        self.clear()
        if not run.loaded:
            self.root.add_leaf("building the session model…")
            return
        labels = run.group_labels()
        trees = run.object_trees()
        if not trees:
            self.root.add_leaf("no RM objects in this trace")
        for client_id, roots in trees.items():
            branch = self.root.add(labels.get(client_id, client_id), data=client_id, expand=True)
            for node in roots:
                self._add(branch, node)

    def _add(self, parent, node: ObjectNode) -> None:
        label = f"{node.label}  {node.stable_name}" + ("" if node.status in ("", "ok", "alive") else f"  [{node.status}]")
        if node.children:
            branch = parent.add(label, data=node, expand=True)
            for child in node.children:
                self._add(branch, child)
        else:
            parent.add_leaf(label, data=node)

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected) -> None:
        event.stop()
        node = event.node.data
        if not isinstance(node, ObjectNode):
            return
        run = self.workspace.run
        self.post_message(ObjectSelected(
            node.client_id, node.handle, f"{node.class_name} {node.handle:#x}",
            frozenset(run.entities_of(node.client_id, node.handle)),
            run.object_handles(node.client_id, node.handle)))

    def action_clear(self) -> None:
        self.post_message(ObjectCleared())
