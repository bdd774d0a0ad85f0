"""The package's layers, read from its source: no import circles, no import up a layer.

Every import in every module counts, those inside functions too (an import hidden in a
function still makes the lower layer depend on the higher). ARCHITECTURE.md draws the
layers; from the bottom:
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nnterp_widgets"
#: Each area's rank: a module may import its own area and the areas below it, never above.
LAYERS = (
    "errors",
    "components",
    "families",
    "engine",
    "checkpoints",
    "requests",
    "interventions",
    "session",
    "figures",
    "widgets",
    "<root>",
)


def _name(path: Path, package_dir: Path = PACKAGE) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str, package_dir: Path = PACKAGE) -> bool:
    relative = Path(*name.split(".")[1:]) if "." in name else Path()
    base = package_dir / relative
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports(package_dir: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its body)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        module = _name(path, package_dir)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if not base.startswith("nnterp_widgets"):
                    continue
                for alias in node.names:  # `from . import probe` imports the module probe
                    found.add(f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}", package_dir) else base)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("nnterp_widgets"))
        graph[module] = found - {module}
    return graph


def area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "<root>"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (strongly connected components of more than one module)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles():
    assert cycles(imports()) == []


def test_no_import_points_up_a_layer():
    up = [
        f"{module} ({area(module)}) imports {target} ({area(target)})"
        for module, targets in imports().items()
        for target in sorted(targets)
        if LAYERS.index(area(target)) > LAYERS.index(area(module))
    ]
    assert up == []


def test_the_reader_finds_a_circle_through_an_import_inside_a_function(tmp_path):
    package = tmp_path / "nnterp_widgets"
    (package / "session").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "session" / "__init__.py").write_text("")
    (package / "session" / "a.py").write_text("from . import b\n")
    (package / "session" / "b.py").write_text("def later():\n    from .a import thing\n")
    (package / "errors.py").write_text("def up():\n    from .session import a\n")
    graph = imports(package)
    assert graph["nnterp_widgets.session.b"] == {"nnterp_widgets.session.a"}
    assert cycles(graph) == [["nnterp_widgets.session.a", "nnterp_widgets.session.b"]]
    assert "nnterp_widgets.session.a" in graph["nnterp_widgets.errors"]  # an import up, inside a function


def test_no_room_imports_a_private_name_of_another():
    """Across rooms only public names: a ``_name`` stays in its own room."""
    private = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _name(path)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            if area(base) == area(module):
                continue
            private += [f"{module} imports {base}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert private == []
