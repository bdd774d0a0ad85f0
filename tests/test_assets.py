"""The front end is served from its sources: anywidget gets nnterp_widgets/js/ as written.

No generated copy and no build step: a one-file widget's ``_esm`` / ``_css`` are its source
files; the ModuleTree's module is its entry with the parts' local imports inlined
(`assets.module_text`). The wheel ships them, and the sources stay self-contained (no
network, no imports but their siblings') and put no text into the DOM as markup.
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
SOURCES = sorted(assets.JS_DIR.rglob("*.js")) + sorted(assets.JS_DIR.glob("*.css"))


def test_module_tree_serves_its_source_files():
    assert assets.MODULE_TREE_ESM == PACKAGE / "js" / "module_tree.js"
    assert assets.MODULE_TREE_CSS == PACKAGE / "js" / "module_tree.css"
    # anywidget sends the entry with its parts inlined, and the style sheet's text
    assert str(ModuleTree._esm) == assets.module_text(assets.MODULE_TREE_ESM)
    assert str(ModuleTree._css) == assets.MODULE_TREE_CSS.read_text(encoding="utf-8")
    parts = assets.module_parts(assets.MODULE_TREE_ESM)
    assert parts[-1] == assets.MODULE_TREE_ESM.resolve()
    assert {path.name for path in parts[:-1]} == {path.name for path in (assets.JS_DIR / "module_tree").glob("*.js")}
    served = str(ModuleTree._esm)
    for path in parts:  # every part's code, once
        body = assets.LOCAL_IMPORT.sub("", path.read_text(encoding="utf-8")).strip().splitlines()[-3:]
        assert served.count("\n".join(body)) == 1, path.name


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
    # only named imports from a sibling file, which the served module inlines
    assert not re.search(r"^\s*import\b", assets.LOCAL_IMPORT.sub("", text), re.M), "no other static import"
    assert not re.search(r"\bimport\s*\(", text), "no dynamic import()"
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in text, f"{sink} found in {path.name}"
    # the export inlines these files in <style> / <script> elements
    for end in ("</script", "</style", "<!--"):
        assert end not in text.lower()


def test_module_tree_is_an_anywidget_module():
    text = assets.module_text(assets.MODULE_TREE_ESM)
    assert re.search(r"^export default \{ render \};$", text, re.M)
    assert re.search(r"^export \{ showToken \};$", text, re.M)
    assert not re.search(r"^\s*import\b", text, re.M), "one module: nothing left to import"
    assert len(re.findall(r"^export\b", text, re.M)) == 2, "only the entry's exports"


def _module(tmp_path, entry: str, **parts: str):
    (tmp_path / "parts").mkdir()
    for name, text in parts.items():
        (tmp_path / "parts" / f"{name}.js").write_text(text, encoding="utf-8")
    path = tmp_path / "entry.js"
    path.write_text(entry, encoding="utf-8")
    return path


def test_module_text_inlines_each_part_once_before_its_importers(tmp_path):
    entry = _module(
        tmp_path,
        'import { b } from "./parts/b.js";\nimport { a } from "./parts/a.js";\nexport default { b, a };\n',
        a="export const a = 1;\n",
        b='import { a } from "./a.js";\nexport function b() {\n  return a;\n}\n',
    )
    assert [path.name for path in assets.module_parts(entry)] == ["a.js", "b.js", "entry.js"]
    text = assets.module_text(entry)
    assert "const a = 1;" in text and "function b() {" in text and "import" not in text
    assert text.index("const a = 1;") < text.index("function b()") < text.index("export default")


@pytest.mark.parametrize(
    "parts, message",
    [
        (dict(a="export const a = 1;\n", b="const a = 2;\nexport const b = a;\n"), "'a' is declared by both"),
        (dict(a='import x from "x";\nexport const a = x;\n', b="export const b = 2;\n"), "only `import"),
        (dict(a="export const a = 1;\nexport default a;\n", b="export const b = 2;\n"), "exports declarations only"),
    ],
)
def test_module_text_refuses_what_one_module_cannot_hold(tmp_path, parts, message):
    entry = _module(
        tmp_path,
        'import { a } from "./parts/a.js";\nimport { b } from "./parts/b.js";\nexport default { a, b };\n',
        **parts,
    )
    with pytest.raises(ValueError, match=message):
        assets.module_text(entry)
