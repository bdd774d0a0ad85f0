"""One explorer opened in a fresh process, its phases timed (used by first_paint.py).

    python bench/first_paint_child.py OUT.json [engine settings as JSON]

From the process's start: the package imported, the module tree described (no engine
yet), the explorer's first paint (its tree holds the prompt's shapes and token chips),
the engine ready, the first answer shown. Written to OUT.json.
"""

import asyncio
import json
import os
import sys
import time

START = time.perf_counter()
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
PROMPT = "The Eiffel Tower is in the city of"


def since() -> float:
    return round(time.perf_counter() - START, 2)


async def explore(settings: dict) -> dict:
    """As in a kernel: the explorer built on a thread that runs an asyncio loop, which the
    session's answers are handed to."""
    phases = {}
    from nnterp_widgets import Explorer
    from nnterp_widgets.session import Session

    phases["imported"] = since()
    session = Session.open(progress=False, dtype="float32", gpu_memory_utilization=0.3, **settings)
    painted = []
    explorer = Explorer(session, prompt=PROMPT)
    explorer.tree.observe(lambda change: painted.append(since()) if change["new"] else None, "prompt_tokens")
    described = []
    session.described.add_done_callback(lambda done: described.append(since()))
    while not explorer.tree.prompt_tokens:
        await asyncio.sleep(0.01)
    phases["described"] = described[0]
    phases["first paint"] = painted[0] if painted else since()
    phases["painted before ready"] = not session.ready
    while not session.ready:
        await asyncio.sleep(0.01)
    phases["engine ready"] = since()
    while explorer.lens.result is None:  # the last panel drawn
        await asyncio.sleep(0.01)
    phases["first answer"] = since()
    session.close()
    return phases


if __name__ == "__main__":
    out = sys.argv[1]
    settings = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    phases = asyncio.run(explore(settings))
    with open(out, "w") as handle:
        json.dump(phases, handle)
