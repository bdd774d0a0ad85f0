"""Memory with 1 vs 5 explorers on one session: widgets share the engine.

RSS of this process and its children (the engine's processes) after one explorer,
then after four more on the same session. The ratio should stay near 1: a widget
holds one prompt's summaries, not an engine.
"""

from __future__ import annotations

import gc

from common import ENGINE_KWARGS, report, tree_rss_bytes


def main() -> str:
    from nnterp_widgets import Explorer
    from nnterp_widgets.checkpoints import checkpoint
    from nnterp_widgets.session import Session

    session = Session.open(checkpoint("qwen2"), progress=False, **ENGINE_KWARGS).wait()
    baseline = tree_rss_bytes()
    explorers = [Explorer(session, prompt="The Eiffel Tower is in")]
    explorers[0].wait()
    gc.collect()
    one = tree_rss_bytes()
    for i in range(4):
        explorers.append(Explorer(session, prompt=f"The Colosseum is in Rome {i}"))
        explorers[-1].wait()
    gc.collect()
    five = tree_rss_bytes()
    opens = session.engine_opens
    session.close()
    return report(
        "RSS with 1 vs 5 explorers on one session",
        [
            ("engine alone", f"{baseline / 2**20:.0f} MiB"),
            ("1 explorer", f"{one / 2**20:.0f} MiB"),
            ("5 explorers", f"{five / 2**20:.0f} MiB"),
            ("ratio 5 / 1", f"{five / one:.3f}"),
            ("engines opened", str(opens)),
        ],
    )


if __name__ == "__main__":
    main()
