"""Graph algorithms over operator ids: dependency order and cycles.

``inputs`` maps each id to the ids it reads from, in document order.

>>> topological_ids({"1": [], "3": ["2"], "2": ["1"]})
['1', '2', '3']
>>> find_cycles({"1": ["3"], "2": ["1"], "3": ["2"], "4": []})
[['1', '3', '2']]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def topological_ids(inputs: Mapping[str, Sequence[str]]) -> list[str]:
    """Ids so that every id comes after its inputs; ties keep document order.

    Inputs that are not keys of ``inputs`` are ignored. Raises ``ValueError`` on a cycle.
    """
    # Kahn's algorithm in waves: each wave is every id whose inputs are all placed, in document
    # order; linear in the graph, so thousands of chained operators stay instant.
    position = {node: index for index, node in enumerate(inputs)}
    waiting = {node: len({i for i in deps if i in inputs}) for node, deps in inputs.items()}
    readers: dict[str, list[str]] = {node: [] for node in inputs}
    for node, deps in inputs.items():
        for dep in {i for i in deps if i in inputs}:
            readers[dep].append(node)
    order: list[str] = []
    wave = [node for node, count in waiting.items() if count == 0]
    while wave:
        order.extend(wave)
        following = []
        for node in wave:
            for reader in readers[node]:
                waiting[reader] -= 1
                if waiting[reader] == 0:
                    following.append(reader)
        wave = sorted(following, key=position.__getitem__)
    if len(order) < len(inputs):
        placed = set(order)
        raise ValueError(f"cycle among {sorted(n for n in inputs if n not in placed)}")
    return order


def find_cycles(inputs: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """One cycle per strongly connected component that has one, as a list of ids along the cycle.

    A cycle ``[a, b, c]`` means ``a`` reads ``b``, ``b`` reads ``c`` and ``c`` reads ``a``.
    """
    position = {node: index for index, node in enumerate(inputs)}
    if all(position.get(dep, -1) < position[node] for node, deps in inputs.items() for dep in deps):
        return []  # every id reads only ids before it (the usual document order): no cycle
    cycles = []
    for component in _strongly_connected(inputs):
        members = set(component)
        start = min(component, key=position.__getitem__)
        if len(component) == 1 and start not in inputs[start]:
            continue
        cycles.append(_walk_cycle(start, members, inputs))
    return sorted(cycles, key=lambda cycle: position[cycle[0]])


def _walk_cycle(start: str, members: set[str], inputs: Mapping[str, Sequence[str]]) -> list[str]:
    # Depth-first search inside the component for a path back to `start`.
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in inputs[node]:
            if nxt == start:
                return path
            if nxt in members and nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return [start]


def _strongly_connected(inputs: Mapping[str, Sequence[str]]) -> list[list[str]]:
    # Tarjan's algorithm, iterative so a long chain of operators cannot exhaust the stack.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in inputs:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            edges = [e for e in inputs[node] if e in inputs]
            if child < len(edges):
                work.append((node, child + 1))
                nxt = edges[child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components
