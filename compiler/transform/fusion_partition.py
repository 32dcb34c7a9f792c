"""Which nodes of a dataflow graph FuseOps puts in one group: TVM's graph partitioner.

Why a post-dominator and not "the one consumer": a value used twice can still be fused when
every path from it meets again at one node before anything else sees it. GELU as ONNX writes it
uses the matmul's result twice, ``x * (erf(x / sqrt2) + 1) * 0.5``; both uses end at the
multiply, so the whole diamond, matmul included, is one kernel and ``x`` never goes to memory.

The algorithm is TVM's (relax/analysis/graph_partitioner.cc), on a graph whose nodes are a
block's bindings in order (a topological order) and whose edges go from a value to each use of
it, labelled with the using op's pattern:

* the post-dominator tree, built in one backward sweep: a node's immediate post-dominator is
  the least common ancestor, in the tree built so far, of its consumers; a node whose value
  escapes (``extern``) or that has no consumer has none. Each node also records the combined
  (largest) pattern of the edges on its way there.
* fusion, node by node in order, over two phases: an out-ewise-fusable node (matmul) joins its
  post-dominator in phase 0 if the way there is elementwise and every node on every path to it
  is at most broadcast; an elementwise/broadcast node joins it if the way is at most injective
  or a reduction and every node in between is at most injective (the post-dominator itself may
  also be a reduction or a matmul's group); an injective node joins it in phase 1, every node
  on the paths injective. Joining merges every node on those paths into the post-dominator's
  group. TVM's third phase fuses into tuples, which are opaque here as in Relax.
* a group holds at most `MAX_FUSED_OPS` nodes (TVM's ``relax.FuseOps.max_depth`` default).

Every node a group absorbs has all its consumers inside the group, so the group's only value
used outside it is its last node's.
"""

from __future__ import annotations

import dataclasses

from ._common import kBroadcast, kCommReduce, kElemWise, kInjective, kOpaque, kOutEWiseFusable

MAX_FUSED_OPS = 256


@dataclasses.dataclass
class FusionGraph:
    """A dataflow block as the partitioner sees it. Node ``i`` is the block's ``i``-th binding.

    ``pattern[i]``: the op pattern of the binding (``kOpaque`` for anything FuseOps cannot
    group); ``outputs[i]``: ``(consumer, edge pattern)`` for each use of its value in the block;
    ``extern[i]``: whether the value is also seen outside the block (returned, a block output,
    used after it), which stops fusion past it."""
    pattern: list
    outputs: list
    extern: list


@dataclasses.dataclass
class _PostDomTree:
    parent: list   # immediate post-dominator of each node, or None
    depth: list
    pattern: list  # combined edge pattern on the way to the parent


def post_dominator_tree(graph: FusionGraph) -> _PostDomTree:
    """Each node's immediate post-dominator within the block, from the last node back."""
    n = len(graph.pattern)
    tree = _PostDomTree([None] * n, [1] * n, [kOpaque] * n)
    for i in reversed(range(n)):
        if graph.extern[i] or not graph.outputs[i]:
            continue
        pattern = kElemWise
        parent = None
        for k, (consumer, edge) in enumerate(graph.outputs[i]):
            if k == 0:
                parent = consumer
            else:
                parent, pattern = _common_ancestor(tree, parent, consumer, pattern)
            pattern = max(pattern, edge)
        tree.parent[i] = parent
        tree.depth[i] = 1 if parent is None else tree.depth[parent] + 1
        tree.pattern[i] = pattern
    return tree


def _common_ancestor(tree: _PostDomTree, a, b, pattern: int):
    """The least common ancestor of ``a`` and ``b`` (None: they have none) and ``pattern``
    combined with the edge patterns of the tree edges climbed to reach it."""
    while a != b:
        if a is None or b is None:
            return None, pattern
        da, db = tree.depth[a], tree.depth[b]
        if da <= db:
            pattern = max(pattern, tree.pattern[b])
            b = tree.parent[b]
        if db <= da:
            pattern = max(pattern, tree.pattern[a])
            a = tree.parent[a]
    return a, pattern


class _Groups:
    """Union-find over the nodes. As in TVM each node starts as its own group, whose pattern
    stays the node's own unless an out-ewise-fusable group (the anchor) merges into it."""

    def __init__(self, patterns):
        n = len(patterns)
        self.parent = list(range(n))
        self.pattern = list(patterns)
        self.anchored = [p == kOutEWiseFusable for p in patterns]
        self.num_nodes = [1] * n

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def merge(self, child: int, parent: int) -> None:
        c, p = self.find(child), self.find(parent)
        if c == p:
            return
        self.num_nodes[p] += self.num_nodes[c]
        self.parent[c] = p
        if self.anchored[c]:
            self.anchored[p] = True
            self.pattern[p] = max(self.pattern[p], self.pattern[c])


def _nodes_up_to(graph: FusionGraph, src: int, sink: int) -> list:
    """The nodes on the paths from ``src`` (excluded) to ``sink`` (included), each once."""
    seen, stack, order = set(), [c for c, _ in graph.outputs[src]], []
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        if node != sink:
            stack.extend(c for c, _ in graph.outputs[node])
    return order


class _Partitioner:
    def __init__(self, graph: FusionGraph):
        self.graph = graph
        self.tree = post_dominator_tree(graph)
        self.groups = _Groups(graph.pattern)

    def run(self) -> list:
        for phase in (0, 1):
            for node in range(len(self.graph.pattern)):
                self._try_fuse(node, phase)
        return [self.groups.find(i) for i in range(len(self.graph.pattern))]

    def _try_fuse(self, node: int, phase: int) -> None:
        """Fuse ``node`` into its immediate post-dominator if the phase's rule allows it."""
        groups, dom = self.groups, self.tree.parent[node]
        kind = groups.pattern[node]  # the node's own group, as TVM reads it
        if kind == kOpaque or dom is None or groups.find(node) == groups.find(dom):
            return
        if self._fused_size(node, dom) > MAX_FUSED_OPS:
            return
        edge = self.tree.pattern[node]
        if kind == kOutEWiseFusable:
            if phase == 0 and edge == kElemWise:
                self._fuse_if(node, dom, lambda k, is_sink: k <= kBroadcast)
        elif kind <= kBroadcast:
            if edge <= kInjective or edge == kCommReduce:
                self._fuse_if(node, dom, lambda k, is_sink: k <= (kOutEWiseFusable if is_sink else kInjective))
        elif kind == kInjective:
            if phase == 1:
                self._fuse_if(node, dom, lambda k, is_sink: k <= kInjective)

    def _fuse_if(self, src: int, sink: int, allowed) -> None:
        """TVM's CheckPath then CommitFuse: when the group of every node on the paths from
        ``src`` to ``sink`` has a pattern ``allowed(pattern, is_sink)`` accepts, all of them
        (``src`` included) join the sink's group."""
        path = _nodes_up_to(self.graph, src, sink)
        groups = self.groups
        if not all(allowed(groups.pattern[groups.find(n)], n == sink) for n in path):
            return
        for n in [src] + path:
            if n != sink:
                groups.merge(n, sink)

    def _fused_size(self, child: int, dom: int) -> int:
        """How many nodes the post-dominator's group would hold with ``child``'s paths in it,
        counted as TVM counts them (each node's own group size)."""
        groups = self.groups
        between = [n for n in _nodes_up_to(self.graph, child, dom) if n != dom]
        return groups.num_nodes[groups.find(dom)] + sum(groups.num_nodes[n] for n in [child] + between)


def partition(graph: FusionGraph) -> list:
    """The group (its union-find root) of every node; a node alone is its own group."""
    return _Partitioner(graph).run()
