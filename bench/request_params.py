"""A registration's requests' sampling settings as vLLM adds them: one settings object shared
by every request (the baseline: vLLM deep-copies it for each request it adds) against each
request's own shallow copy marked ``skip_clone`` (what `StandardizedVLLM.registered` sends,
`stream_params`), which vLLM then takes as it is.

Times what a request's settings cost in ``add_request`` (the copy, then vLLM's ``clone``)
for one engine call of a patching sweep (``PATCH_CELLS`` requests); best of 5.

    python bench/request_params.py
"""

from __future__ import annotations

import copy

from common import best_seconds, report


def main() -> str:
    from vllm import SamplingParams

    from nnterp_widgets.engine.standardized import stream_params
    from nnterp_widgets.interventions.patching import PATCH_CELLS as REQUESTS

    shared = SamplingParams(max_tokens=1, temperature=0.0)
    ours = stream_params()

    def baseline():
        for _ in range(REQUESTS):
            shared.clone()

    def own_copies():
        for _ in range(REQUESTS):
            copy.copy(ours).clone()

    base, mine = best_seconds(baseline), best_seconds(own_copies)
    return report(
        f"A registration's requests' sampling settings in add_request ({REQUESTS} requests, CPU)",
        [
            ("one shared settings object, deep-copied by vLLM (baseline)", f"{base * 1e3:.1f} ms"),
            ("each request's own copy, marked skip_clone", f"{mine * 1e3:.1f} ms"),
            ("own copies / baseline", f"{mine / base:.2f}"),
            ("skip_clone known to this vLLM", str(getattr(ours, "skip_clone", False))),
        ],
    )


if __name__ == "__main__":
    main()
