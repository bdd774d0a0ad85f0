"""The docs say what the code does: ARCHITECTURE.md's rooms are the package's folders, in
the order the import test enforces; DEVELOP.md's Python examples run; no doc names a
folder of one machine; every file of the package that a doc, a docstring or a comment names
exists, as does every name of it that one names in backticks (``figures.attention.head_scale``)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from test_layers import LAYERS

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "nnterp_widgets"
DOCS = [REPO / "README.md", REPO / "ARCHITECTURE.md", REPO / "DEVELOP.md", *sorted((REPO / "docs").glob("*.md"))]
#: The package's folders: the rooms that are not single modules.
FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("__"))
#: Folders of one machine (this one's checkout, a home): a doc read elsewhere cannot use them.
MACHINE_PATHS = re.compile(r"(/work/|/root/|/home/[a-z])")


def _rooms() -> list[str]:
    """The rooms ARCHITECTURE.md's picture names, top first (its first fenced block)."""
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = re.search(r"```\n(.*?)```", text, re.S).group(1)
    return [match.group(1) for match in re.finditer(r"^([a-z_]+(?:/|\.py))\s", block, re.M)]


def test_the_architecture_names_every_room_and_only_rooms():
    rooms = _rooms()
    folders = {f"{name}/" for name in FOLDERS}
    modules = {p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("__")}
    assert sorted(rooms) == sorted(folders | modules)


def test_the_architecture_orders_the_rooms_as_the_import_test_does():
    python_rooms = [room.removesuffix("/").removesuffix(".py") for room in _rooms() if room != "js/"]
    assert python_rooms == [layer for layer in reversed(LAYERS) if layer != "<root>"]


def _python_blocks(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M)
    return [re.sub(rf"^{indent}", "", code, flags=re.M) for indent, code in blocks]


@pytest.mark.parametrize("index", range(len(_python_blocks(REPO / "DEVELOP.md"))))
def test_develop_examples_run(index):
    code = _python_blocks(REPO / "DEVELOP.md")[index]
    # A family example is a file of families/vllm/: it runs as a module of that package.
    package = "nnterp_widgets.families.vllm" if "FAMILY = " in code else "__main__"
    namespace = {"__name__": f"{package}.example" if package != "__main__" else package, "__package__": package}
    exec(compile(code, f"DEVELOP.md block {index}", "exec"), namespace)
    if "FAMILY = " in code:
        assert namespace["FAMILY"].model_type == "example"


def test_develop_has_python_examples():
    assert _python_blocks(REPO / "DEVELOP.md")


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_no_doc_names_a_folder_of_one_machine(doc):
    found = [line for line in doc.read_text(encoding="utf-8").splitlines() if MACHINE_PATHS.search(line)]
    assert found == []


#: A file of the package named by its path from the package's root (``figures/tokens.py``,
#: ``nnterp_widgets/js/module_tree/format.js``), not inside another package's path
#: (``vllm/engine/core.py``).
PACKAGE_FILE = re.compile(r"(?<![\w/.])(?:nnterp_widgets/)?((?:%s)/[\w/]+\.(?:py|js|css))" % "|".join(FOLDERS))
#: What names package files: the docs, the package's own sources and the tests.
NAMING = [
    *DOCS,
    *(p for p in sorted(PACKAGE.rglob("*")) if p.suffix in {".py", ".js", ".css"}),
    *sorted((REPO / "tests").glob("*.py")),
]


def test_every_package_file_named_exists():
    missing = {
        f"{path.relative_to(REPO)}: {match.group(1)}"
        for path in NAMING
        for match in PACKAGE_FILE.finditer(path.read_text(encoding="utf-8"))
        if not (PACKAGE / match.group(1)).exists()
    }
    assert sorted(missing) == []


#: A name of the package in backticks, from a room on (``requests.attention.GPU_ROWS_BYTES``;
#: ``session.patterns``, a session's own, which the session module's `Session` holds).
PACKAGE_NAME = re.compile(r"(?<![\w.])`{1,2}((?:%s)(?:\.[A-Za-z_]\w*)+)`{1,2}" % "|".join(FOLDERS))


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module("nnterp_widgets." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for part in parts[cut:]:
            if not hasattr(found, part):
                return parts[0] == "session" and len(parts) == 2 and _a_sessions(parts[1])
            found = getattr(found, part)
        return True
    return False


def _a_sessions(attribute: str) -> bool:
    from nnterp_widgets.session import Session

    return hasattr(Session, attribute) or f"self.{attribute} =" in inspect.getsource(Session.__init__)


def test_every_package_name_named_exists():
    pytest.importorskip("anywidget")  # the widgets' modules are among the names
    named = [
        (path, match.group(1))
        for path in [*DOCS[:3], *(p for p in NAMING if PACKAGE in p.parents)]
        for match in PACKAGE_NAME.finditer(path.read_text(encoding="utf-8"))
    ]
    assert named
    assert [f"{path.relative_to(REPO)}: {name}" for path, name in named if not _resolves(name)] == []
