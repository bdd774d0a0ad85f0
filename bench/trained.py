"""The trained model (SmolLM2-135M, 30 layers, vocab 49,152) on the CPU engine.

    python bench/trained.py

One session on `checkpoints.trained()`. Per prompt length (16, 128, 512 tokens):

* the explorer's prompt request (`session.prompt`: the tokens, the lens over the last 32
  positions, one layer's pattern) against two floors on the same engine, in the same run:
  the raw forward (one trace saving the logits) and the raw forward plus the lens's own
  arithmetic (per layer: the final norm and the vocabulary projection of the window's
  positions, softmax and top-5: layers x window x hidden x vocab multiply-adds);
* the attribution request (`session.attribute`) against the prompt request;
* the contribution graph's request (`session.contributions`: every block's shares of
  every position, layers x tokens² x hidden) against the raw forward and the prompt request.

And a patching sweep (`session.patch`, 30 layers x 9 positions of the tour's pair)
against vLLM's own prefill of as many copies of the corrupted prompt (`LLM.generate`, one
token each): a cell is one such request with one registered block's write and read.
Targets (issue 22/23): prompt within 1.5x the second floor and under 1 s at 16 tokens;
attribution within 1.5x the prompt request; the sweep within 2x its floor.
"""

from __future__ import annotations


import torch

from common import ENGINE_KWARGS, median_seconds, report, vllm_prefill
from scale import prompt_of, raw_forward

LENGTHS = (16, 128, 512)
LENS_WINDOW = 32
CLEAN = "The Eiffel Tower is in the city of"
CORRUPTED = "The Colosseum is in the city of"


def forward_and_lens(text: str, window: int):
    def run(model):
        with model.trace(text, temperature=0.0, max_tokens=1):
            out = list().save()
            for layer in model.layers:
                stream = layer.layer_output[0, -window:]
                top = torch.softmax(model.project_on_vocab(stream).float(), -1).topk(5)
                out.append((top.values.cpu(), top.indices.cpu()))
            out.append(model.logits.cpu())
        return out

    return run


def main() -> str:
    from nnterp_widgets.checkpoints import trained
    from nnterp_widgets.session import Session

    session = Session.open(trained(), progress=False, max_model_len=1024, **ENGINE_KWARGS).wait()
    tokenizer = session.tokenizer()
    rows = []

    def timed(fn, repeat=5):
        return median_seconds(fn, repeat=repeat, warmup=1)

    for tokens in LENGTHS:
        text = prompt_of(tokenizer, tokens)
        repeat = 5 if tokens <= 128 else 3
        forward = timed(lambda: session.request(raw_forward(text), key="forward").result(), repeat)
        lens = timed(
            lambda: session.request(forward_and_lens(text, min(LENS_WINDOW, tokens)), key="lens").result(), repeat
        )
        prompt = timed(lambda: session.prompt(text).result(), repeat)
        attribution = timed(lambda: session.attribute(text, " Paris", " Rome").result(), repeat)
        graph = timed(lambda: session.contributions(text).result(), repeat)
        edges = len(session.contributions(text).result().shares)
        rows += [
            (f"{tokens} tokens: raw forward (logits)", f"{forward * 1e3:.0f} ms"),
            (f"{tokens} tokens: forward + lens arithmetic", f"{lens * 1e3:.0f} ms"),
            (f"{tokens} tokens: prompt request", f"{prompt * 1e3:.0f} ms"),
            (f"{tokens} tokens: prompt / forward", f"{prompt / forward:.2f}"),
            (f"{tokens} tokens: prompt / (forward + lens)", f"{prompt / lens:.2f}"),
            (f"{tokens} tokens: attribution request", f"{attribution * 1e3:.0f} ms"),
            (f"{tokens} tokens: attribution / prompt", f"{attribution / prompt:.2f}"),
            (f"{tokens} tokens: contribution graph request", f"{graph * 1e3:.0f} ms ({edges} edges ≥ 1%)"),
            (f"{tokens} tokens: graph / forward", f"{graph / forward:.2f}"),
            (f"{tokens} tokens: graph / prompt", f"{graph / prompt:.2f}"),
        ]
    count = 30 * len(tokenizer(CLEAN)["input_ids"])
    # Each once after one warm-up run (a first run also compiles its intervention's code).
    sweep_s = timed(lambda: session.patch(CLEAN, CORRUPTED, " Paris", " Rome").result(), 1)
    sweep = session.patch(CLEAN, CORRUPTED, " Paris", " Rome").result()
    floor_s = timed(lambda: session.request(vllm_prefill([CORRUPTED] * count), key="floor").result(), 1)
    layers, columns = sweep.patched.shape
    rows += [
        (f"patching sweep {layers} x {columns} ({sweep.requests} requests)", f"{sweep_s:.1f} s"),
        (f"vLLM's own prefill of {count} copies of the corrupted prompt", f"{floor_s:.1f} s"),
        ("sweep / vLLM's prefill", f"{sweep_s / floor_s:.2f}"),
    ]
    session.close()
    return report("The trained model (SmolLM2-135M) on the CPU engine", rows)


if __name__ == "__main__":
    main()
