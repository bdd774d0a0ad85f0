"""The widgets' front-end sources, served to anywidget from the package's files.

``nnterp_widgets/js/`` holds the ES modules and style sheets exactly as written: no build
step and no generated copy. A widget whose front end is one file gets that file
(``_esm = path``; anywidget reads it and, with ``ANYWIDGET_HMR=1``, reloads the widget when
it changes). The module tree's front end is an entry module and its parts in
``js/module_tree/``, whose DOM helper and theme watcher the token views and the dataset
table import too; anywidget takes one module, so `module_text` inlines the parts an
entry imports (``import { a } from "./module_tree/x.js";``) into one module text. The
browser can also load the files themselves as ES modules: they are the same code.
Each widget's trait contract is the comment at the top of its ``js/*.js``.

Example::

    text = module_text(MODULE_TREE_ESM)  # what ModuleTree._esm and the HTML export hold
"""

from __future__ import annotations

import re
from pathlib import Path

JS_DIR: Path = Path(__file__).resolve().parent.parent / "js"

MODULE_TREE_ESM: Path = JS_DIR / "module_tree.js"
MODULE_TREE_CSS: Path = JS_DIR / "module_tree.css"
STEP_SLIDER_ESM: Path = JS_DIR / "step_slider.js"
STEP_SLIDER_CSS: Path = JS_DIR / "step_slider.css"
POSITION_WINDOW_ESM: Path = JS_DIR / "position_window.js"
POSITION_WINDOW_CSS: Path = JS_DIR / "position_window.css"
ATTENTION_TOKENS_ESM: Path = JS_DIR / "attention_tokens.js"
ATTENTION_TOKENS_CSS: Path = JS_DIR / "attention_tokens.css"
TOKEN_CHIPS_CSS: Path = JS_DIR / "token_chips.css"
DATASET_TABLE_ESM: Path = JS_DIR / "dataset_table.js"
DATASET_TABLE_CSS: Path = JS_DIR / "dataset_table.css"
SHADED_TEXT_ESM: Path = JS_DIR / "shaded_text.js"
SHADED_TEXT_CSS: Path = JS_DIR / "shaded_text.css"
IN_VIEW_ESM: Path = JS_DIR / "in_view.js"
IN_VIEW_CSS: Path = JS_DIR / "in_view.css"

__all__ = [
    "ATTENTION_TOKENS_CSS",
    "ATTENTION_TOKENS_ESM",
    "DATASET_TABLE_CSS",
    "DATASET_TABLE_ESM",
    "IN_VIEW_CSS",
    "IN_VIEW_ESM",
    "JS_DIR",
    "MODULE_TREE_CSS",
    "MODULE_TREE_ESM",
    "POSITION_WINDOW_CSS",
    "POSITION_WINDOW_ESM",
    "SHADED_TEXT_CSS",
    "SHADED_TEXT_ESM",
    "STEP_SLIDER_CSS",
    "STEP_SLIDER_ESM",
    "TOKEN_CHIPS_CSS",
    "module_parts",
    "module_text",
    "style_text",
]

#: The one import form a part may use: named bindings from a sibling file, on one line.
LOCAL_IMPORT = re.compile(r'^import \{[\w$, ]+\} from "(\./[\w/]+\.js)";$', re.M)
#: Any other import (a bare specifier, a URL, a dynamic import) is refused: nothing is fetched.
ANY_IMPORT = re.compile(r"^\s*import\b|\bimport\s*\(", re.M)
#: A part's top-level declarations, exported or not: the inlined parts share one scope.
TOP_LEVEL = re.compile(r"^(?:export )?(?:async )?(?:function\*?|const|let|var|class) ([\w$]+)", re.M)
#: A part's exports become plain declarations in the one module (the entry keeps its own).
EXPORT = re.compile(r"^export (?=(?:async )?(?:function|const|let|var|class) )", re.M)


def module_parts(entry: Path) -> list[Path]:
    """``entry``'s local imports, depth first, each once, then ``entry``: the order the
    parts are inlined in (a part comes before every part that imports it)."""
    order: list[Path] = []
    visiting: set[Path] = set()

    def visit(path: Path) -> None:
        if path in order:
            return
        if path in visiting:
            raise ValueError(f"{path.name} imports itself through its imports")
        visiting.add(path)
        for relative in LOCAL_IMPORT.findall(path.read_text(encoding="utf-8")):
            visit((path.parent / relative).resolve())
        visiting.discard(path)
        order.append(path)

    visit(entry.resolve())
    return order


def module_text(entry: Path) -> str:
    """One ES module: ``entry`` with its local imports inlined (`module_parts`' order).

    Raises ``ValueError`` for an import of another form, or a top-level name declared by
    two parts (the parts share the module's scope).
    """
    parts = module_parts(entry)
    declared: dict[str, Path] = {}
    texts = []
    for path in parts:
        text = LOCAL_IMPORT.sub("", path.read_text(encoding="utf-8"))
        if ANY_IMPORT.search(text):
            raise ValueError(f'{path.name}: only `import {{ ... }} from "./file.js";` lines are inlined')
        for name in TOP_LEVEL.findall(text):
            if name in declared:
                raise ValueError(f"{name!r} is declared by both {declared[name].name} and {path.name}")
            declared[name] = path
        if path != parts[-1]:
            if "export default" in text or re.search(r"^export \{", text, re.M):
                raise ValueError(f"{path.name}: a part exports declarations only (the entry exports the module)")
            text = EXPORT.sub("", text)
        where = path.relative_to(entry.resolve().parent).as_posix()
        texts.append(f"// ---- {where}\n{text.strip()}\n")
    return "\n".join(texts)


def style_text(*sheets: Path) -> str:
    """Style sheets as one text, in order (a widget takes one): shared sheets first, so
    that a view's own rules, after them, win where both set a property."""
    return "\n".join(sheet.read_text(encoding="utf-8") for sheet in sheets)
