"""graph_cycles.py - the cycles of a dependency graph, for the layer tests of libac
(tests/test_layers_c.py) and of the Python package (tests/test_layers_python.py)."""


def strongly_connected(edges):
    """The strongly connected components of more than one node of edges
    {node: iterable of the nodes it depends on}, each sorted: Tarjan's algorithm
    with an explicit stack (the graphs are deep enough to pass Python's recursion limit)."""
    index, low, on, stack, found = {}, {}, set(), [], []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
