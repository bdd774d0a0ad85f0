"""Where batched attribution's time goes (issue 38's 1.5x target): the trained model, CPU.

    python bench/attribution_profile.py

On 64 prompts of 12-20 tokens (bench/dataset.py's), one engine request a chunk each:
the batched raw forward (logits only); the same forward reading what attribution reads
(every layer's attention output, head outputs and MLP output at the last position, and the
last stream) and nothing more; attribution without splitting the heads; attribution whole
(`each(...).attribute`). The differences say what the reads, the head split and the rest
cost per prompt.
"""

from __future__ import annotations

import time

from common import ENGINE_KWARGS, report
from dataset import batched_forward, dataset

#: Prompts profiled (fewer than bench/dataset.py's 256: four requests of each kind run here).
COUNT = 64


def reads_only(prompts: list[str]):
    def run(model):
        with model.trace(temperature=0.0, max_tokens=1) as tracer:
            got = list().save()
            for text in prompts:
                with tracer.invoke(text):
                    parts = [model.layers[0].layer_input[0, -1]]
                    for layer in model.layers:
                        parts.append(layer.self_attn.attention_head_outputs[0, -1].reshape(-1))
                        parts.append(layer.self_attn.attention_output[0, -1])
                        parts.append(layer.mlp.mlp_output[0, -1])
                    parts.append(model.layers[-1].layer_output[0, -1])
                    got.append(len(parts))
        return got

    return run


def main() -> str:
    from nnterp_widgets.checkpoints import trained
    from nnterp_widgets.requests import attribution as attribution_module
    from nnterp_widgets.session import Session

    session = Session.open(trained(), progress=False, max_model_len=256, **ENGINE_KWARGS).wait()
    prompts = dataset(session.tokenizer(), COUNT)
    answers = [" Paris"] * len(prompts)
    rows = []

    def timed(fn) -> float:
        fn()
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    try:
        forward = timed(lambda: session.request(batched_forward(prompts, lens=False)).result())
        reads = timed(lambda: session.request(reads_only(prompts)).result())
        whole = timed(lambda: session.each(prompts).attribute(answers).result())
        original = attribution_module.heads_reason
        attribution_module.heads_reason = lambda model: "profiled without the head split"
        try:
            unsplit = timed(lambda: session.each(prompts).attribute(answers).result())
        finally:
            attribution_module.heads_reason = original
        each = 1e3 / len(prompts)
        rows += [
            ("batched raw forward", f"{forward:.2f} s"),
            ("+ attribution's reads only", f"{reads:.2f} s (+{(reads - forward) * each:.1f} ms a prompt)"),
            ("attribution without the head split", f"{unsplit:.2f} s (+{(unsplit - reads) * each:.1f} ms a prompt)"),
            ("attribution whole", f"{whole:.2f} s (head split +{(whole - unsplit) * each:.1f} ms a prompt)"),
            ("attribution / forward", f"{whole / forward:.2f}"),
        ]
    finally:
        session.close()
    return report("Where batched attribution's time goes (64 prompts, trained model, CPU)", rows)


if __name__ == "__main__":
    main()
