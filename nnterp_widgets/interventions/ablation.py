"""Heads zeroed against the clean run: the `ablation` request (its result, `AblationDelta`,
is `requests.sites`': the prompt request's ablation returns it too).

delta = ablation(model, "The Eiffel Tower is in the city of", [(5, 0), (7, 2)])
delta.clean_top, delta.ablated_probs      # the clean top-k in both runs
"""

from __future__ import annotations

from ..requests.common import ONE_GREEDY_STEP, check_prompt
from ..requests.sites import AblationDelta, ablate_heads, ablation_delta, check_heads


def ablation(model, text: str, heads, k: int = 5) -> AblationDelta:
    """One request, two invokes (clean, ablated): the ablated run against the clean one."""
    ids = check_prompt(model, text)
    chosen = check_heads(model, heads)
    reader = model.reader()  # the heads are zeroed in place, which the reader can do
    with model.trace(**ONE_GREEDY_STEP) as tracer:
        out = dict().save()
        with tracer.invoke(ids):
            out["clean"] = reader.next_token_probs[0]
        with tracer.invoke(ids):
            ablate_heads(reader, chosen)
            out["ablated"] = reader.next_token_probs[0]
    return ablation_delta(out["clean"].float().cpu(), out["ablated"].float().cpu(), chosen, k)
