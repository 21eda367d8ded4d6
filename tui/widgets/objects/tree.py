"""The RM object tree per client: class names, handles, stable names, lifetimes.

Selecting an object lights up its lanes and narrows the events to records
naming it or anything below it.
"""

from __future__ import annotations

from rich.text import Text
from rmtrace.tui.messages import ObjectCleared, ObjectSelected
from rmtrace.tui.view import ObjectNode
from rmtrace.tui.workspace import Workspace
from textual import on
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

EAGER_NODES = 2000
"""Up to this many objects the whole tree is built and open; past it, a node's children come on expand."""
OK_STATUS = frozenset({"", "ok", "alive", "NV_OK"})


def _count(nodes) -> int:
    return sum(1 + _count(n.children) for n in nodes)


class ObjectsTree(Tree[ObjectNode | str]):
    """Clients at the top, each with its objects nested by parent handle."""

    BINDINGS = [
        Binding("escape", "clear", "Clear selection"),
    ]

    def __init__(self, workspace: Workspace, *, id: str | None = None) -> None:
        super().__init__("objects", id=id)
        self.workspace = workspace
        self.show_root = False
        self._pending: dict[int, tuple[ObjectNode, ...] | list[ObjectNode]] = {}
        """Children not added yet, by the id of the tree node they go under (filled on expand)."""

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        run = self.workspace.run
        self.clear()
        self._pending.clear()
        if not run.loaded:
            self.root.add_leaf("building the session model…")
            return
        if not run.trees_ready:
            self.root.add_leaf("building the object trees…")
            return
        labels = run.group_labels()
        trees = run.object_trees()
        if not trees:
            self.root.add_leaf("no RM objects in this trace")
        eager = sum(_count(roots) for roots in trees.values()) <= EAGER_NODES
        for client_id, roots in trees.items():
            branch = self.root.add(Text(labels.get(client_id, client_id)), data=client_id, expand=eager)
            self._pending[id(branch)] = roots
            if eager:
                self._fill(branch, everything=True)

    def _fill(self, branch: TreeNode, everything: bool = False) -> None:
        """Add the children waiting under ``branch`` (all levels, or one level with the rest on expand)."""
        for node in self._pending.pop(id(branch), ()):
            label = f"{node.label}  {node.stable_name}" + ("" if node.status in OK_STATUS else f"  [{node.status}]")
            if not node.children:
                branch.add_leaf(Text(label), data=node)
                continue
            child = branch.add(Text(label), data=node, expand=everything)
            self._pending[id(child)] = node.children
            if everything:
                self._fill(child, everything=True)

    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded) -> None:
        event.stop()
        self._fill(event.node)

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
