"""Reads per engine step, not per request: what they would save a dataset question.

A registered question (`StandardizedVLLM.registered`) reads each layer's stream once per
request: nnsight hands every request's copy of the block its own span of the step's slab,
so 1,000 prompts x 32 layers are 32,000 hand-offs. Here, instead, a forward hook on each
decoder layer (installed in the engine's workers with vLLM's ``collective_rpc``) gathers
the last row of every request the step runs, once a step; each request's block then makes
two hand-offs (the first layer's output, to find its row in the slab, and the logits) and
takes its share. ``lens``: the step's rows are also projected on the vocabulary in one
product and their top-k taken once a step.

Llama-shaped decoder layers only (their output is ``(hidden, residual)``, the stream their
sum; the final norm an RMS norm): this is a measurement for `bench/gpu_dataset_parts.py`,
not a path of the package. The workers import this module by name: run with ``bench/`` on
``PYTHONPATH`` where vLLM's engine runs in its own process (the GPU).
"""

from __future__ import annotations

import torch

#: This worker's hooks and the current step's gathered rows.
_STATE: dict = {"hooks": [], "step": {}}


def install(worker) -> int:
    """(``collective_rpc``) A gathering hook on each decoder layer of this worker's model."""
    uninstall(worker)
    runner = worker.model_runner
    model = runner.get_model()
    layers = model.model.layers
    interleaver = runner.nnsight_model.interleaver
    step = _STATE["step"]

    def hook_for(index: int):
        def hook(module, args, output):
            hidden, residual = output
            if index == 0:
                step.clear()
                ends = sorted({m.batch_group[0] + m.batch_group[1] - 1 for m in interleaver.mediators if m.batch_group})
                step["rows"] = torch.tensor(ends, dtype=torch.long, device=hidden.device)
                step["where"] = {row: at for at, row in enumerate(ends)}
                step["slab"] = (hidden.data_ptr(), hidden.stride(0) * hidden.element_size())
                step["streams"] = []
            rows = step["rows"]
            step["streams"].append(hidden.index_select(0, rows) + residual.index_select(0, rows))

        return hook

    _STATE["hooks"] = [layer.register_forward_hook(hook_for(i)) for i, layer in enumerate(layers)]
    _STATE["norm"] = (model.model.norm.weight, model.model.norm.variance_epsilon)
    _STATE["head"] = model.lm_head.weight[: model.logits_processor.org_vocab_size]  # its rows padded
    return len(_STATE["hooks"])


def uninstall(worker) -> int:
    """(``collective_rpc``) Remove this worker's hooks."""
    for handle in _STATE["hooks"]:
        handle.remove()
    count = len(_STATE["hooks"])
    _STATE["hooks"] = []
    _STATE["step"].clear()
    return count


def _row(first: torch.Tensor) -> int:
    """The slab row of the last token of the request whose first-layer view is ``first``."""
    base, row_bytes = _STATE["step"]["slab"]
    return _STATE["step"]["where"][(first.data_ptr() - base) // row_bytes + first.shape[0] - 1]


def _stacked() -> torch.Tensor:
    """The step's gathered rows, ``[requests, layers, hidden]``, stacked once a step."""
    step = _STATE["step"]
    if "stacked" not in step:
        step["stacked"] = torch.stack(step["streams"], 1)
    return step["stacked"]


def streams(first: torch.Tensor) -> torch.Tensor:
    """The request's ``[layers, hidden]`` last-position streams, from the step's gather."""
    return _stacked()[_row(first)]


def lens(first: torch.Tensor, k: int) -> torch.Tensor:
    """The request's ``[layers, 2k]`` lens top-k (probabilities, then ids as floats), the
    step's rows projected in one product."""
    step = _STATE["step"]
    if "lens" not in step:
        weight, eps = _STATE["norm"]
        x = _stacked().float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        probs = (x.to(_STATE["head"].dtype) @ _STATE["head"].T).float().softmax(-1)
        top = probs.topk(k)
        step["lens"] = torch.cat([top.values, top.indices.float()], -1)
    return step["lens"][_row(first)]


def step_streams_reads(model) -> dict:
    """A registered block: the model's top-5 and the request's share of the step's streams."""
    import step_reads

    first = model.layers[0].output[0]
    top = model.logits[0, -1].topk(5).indices
    return {"top": top.cpu().numpy(), "streams": step_reads.streams(first).float().cpu().numpy()}


def step_lens_reads(model, k: int) -> dict:
    """A registered block: the model's top-5 and the request's share of the step's lens."""
    import step_reads

    first = model.layers[0].output[0]
    top = model.logits[0, -1].topk(5).indices
    return {"top": top.cpu().numpy(), "lens": step_reads.lens(first, k).cpu().numpy()}
