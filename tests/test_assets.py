"""The front end is served from its sources: anywidget reads nnterp_widgets/js/ as it is.

No generated copy, no bundler: the ModuleTree's ``_esm`` / ``_css`` are the source files,
the wheel ships them, and the sources stay self-contained (no network, no imports) and
put no text into the DOM as markup.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from nnterp_widgets import ModuleTree
from nnterp_widgets.widgets import assets

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "nnterp_widgets"
SOURCES = sorted(assets.JS_DIR.glob("*.js")) + sorted(assets.JS_DIR.glob("*.css"))


def test_module_tree_serves_its_source_files():
    assert assets.MODULE_TREE_ESM == PACKAGE / "js" / "module_tree.js"
    assert assets.MODULE_TREE_CSS == PACKAGE / "js" / "module_tree.css"
    # anywidget reads the files (and watches them for hot reload): what it sends is their text
    assert str(ModuleTree._esm) == assets.MODULE_TREE_ESM.read_text(encoding="utf-8")
    assert str(ModuleTree._css) == assets.MODULE_TREE_CSS.read_text(encoding="utf-8")


def test_no_generated_copy_of_the_front_end():
    """The sources are the only copy: nothing else in the repository holds them."""
    markers = {path: path.read_text(encoding="utf-8").splitlines()[1] for path in SOURCES}
    for path in REPO.rglob("*"):
        if not path.is_file() or path in markers or {".git", ".venv", "artifacts"} & set(path.parts):
            continue
        if path.suffix not in (".js", ".css", ".html", ".py"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for source, marker in markers.items():
            assert marker not in text, f"{path} holds a copy of {source.name}"


def test_wheel_ships_the_sources():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["nnterp_widgets"]
    for path in SOURCES:
        relative = path.relative_to(PACKAGE).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_sources_are_self_contained_and_safe(path):
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"https?://", text, re.I), "no URLs (no CDN)"
    assert not re.search(r"""["'`(]//""", text), "no protocol-relative URLs"
    assert not re.search(r"@import\b", text), "no imported style sheets"
    assert not re.search(r"^\s*import\b", text, re.M), "no static import"
    assert not re.search(r"\bimport\s*\(", text), "no dynamic import()"
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in text, f"{sink} found in {path.name}"
    # the export inlines these files in <style> / <script> elements
    for end in ("</script", "</style", "<!--"):
        assert end not in text.lower()


def test_module_tree_is_an_anywidget_module():
    text = assets.MODULE_TREE_ESM.read_text(encoding="utf-8")
    assert re.search(r"^export default \{ render \};$", text, re.M)
    assert re.search(r"^export function showToken\(", text, re.M)
