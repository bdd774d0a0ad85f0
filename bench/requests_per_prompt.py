"""Engine requests per prompt change: the explorer vs one trace per panel.

The explorer asks once and feeds the tree, the pattern and the lens from that one
result; the baseline asks once per panel and each panel renders its own answer.
Ratios of requests and of wall time (engine work plus rendering, both sides).
"""

from __future__ import annotations

import time

from common import ENGINE_KWARGS, report

PROMPTS = [f"The Eiffel Tower is in {word}" for word in ("Paris", "Rome", "London", "Berlin", "Tokyo")]


def main() -> str:
    from nnterp_widgets import Explorer
    from nnterp_widgets.checkpoints import checkpoint
    from nnterp_widgets.session import Session

    session = Session.open(checkpoint("qwen2"), progress=False, **ENGINE_KWARGS).wait()
    explorer = Explorer(session, prompt=PROMPTS[0])
    explorer.wait()

    before, start = session.engine_requests, time.perf_counter()
    for prompt in PROMPTS:
        explorer.run(prompt)
        explorer.wait()
    linked_requests, linked_seconds = session.engine_requests - before, time.perf_counter() - start

    # The baseline: each panel asks for its own trace and renders its own answer.
    panels = {"tree": explorer.tree, "attention": explorer.attention, "lens": explorer.lens}
    before, start = session.engine_requests, time.perf_counter()
    for prompt in PROMPTS:
        futures = {name: session.prompt(prompt, key=f"panel-{name}") for name in panels}
        for name, future in futures.items():
            panels[name].update(future.result())
    separate_requests, separate_seconds = session.engine_requests - before, time.perf_counter() - start
    session.close()
    changes = len(PROMPTS)
    return report(
        "Engine requests per prompt change",
        [
            ("explorer: requests per change", f"{linked_requests / changes:.1f}"),
            ("one trace per panel: requests per change", f"{separate_requests / changes:.1f}"),
            ("request ratio explorer / per panel", f"{linked_requests / separate_requests:.2f}"),
            ("wall-time ratio explorer / per panel", f"{linked_seconds / separate_seconds:.2f}"),
        ],
    )


if __name__ == "__main__":
    main()
