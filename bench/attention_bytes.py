"""Bytes sent per attention layer vs prompt length, up to 1,024 tokens.

For each length, one engine request on the tiny checkpoint, then what the attention
view sends for one layer: the selected head's heatmap and the head grid, as plotly's
JSON (numpy arrays go as base64 typed arrays), against ipywidgets' 10 MB message cap.
The raw float32 pattern of the layer is the baseline.
"""

from __future__ import annotations

from common import ENGINE_KWARGS, report

CAP = 10 * 2**20
WORDS = "The Eiffel Tower is in Paris and the Colosseum is in Rome".split()


def main(lengths=(16, 64, 256, 1024)) -> str:
    from nnterp_widgets.checkpoints import checkpoint
    from nnterp_widgets.session import Session
    from nnterp_widgets.figures.attention import attention_figure, head_grid_figure

    session = Session.open(checkpoint("qwen2"), progress=False, max_model_len=1100, **ENGINE_KWARGS).wait()
    tokenizer = session.tokenizer()
    rows = []
    for length in lengths:
        words, prompt = [], ""
        while len(tokenizer(prompt)["input_ids"]) < length:
            words.append(WORDS[len(words) % len(WORDS)])
            prompt = " ".join(words)
        result = session.prompt(prompt).result()
        panel = result.attention  # layer 0, the first, comes with the prompt
        tokens = len(result.tokens)
        sent = len(attention_figure(panel, 0).to_json()) + len(head_grid_figure(panel).to_json())
        raw = len(panel.to_bytes())
        rows.append(
            (
                f"{tokens} tokens",
                f"{sent / 2**20:6.2f} MiB sent ({sent / CAP:.0%} of the cap), "
                f"raw layer {raw / 2**20:6.2f} MiB, sent/raw {sent / raw:.2f}",
            )
        )
    session.close()
    return report("Bytes sent per attention layer (one head's heatmap + head grid)", rows)


if __name__ == "__main__":
    main()
