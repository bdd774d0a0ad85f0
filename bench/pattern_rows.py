"""The shown pattern's arithmetic: keys cut after each row block's last query, against all keys.

    python bench/pattern_rows.py [4096,8192] [--rows 32,256] [--heads 9 --kv-heads 3]

`requests.attention.pattern_payload` (what the prompt request ships for the shown layer:
max-pooled cells and thumbnails) on queries and keys of a prompt's length, scored with
`recompute_scores` as on the engine. Baseline in the same run: the same payload with every
row block scored against every key (what it did before the cut), the extra columns dropped
before they are pooled, so both ship the same bytes. Times are medians of 3 after a
warm-up, at row blocks of ``--rows`` MiB (`ROWS_BYTES` is the CPU's default); the two
payloads are checked equal. The trained model's shape by default (9 heads, 3 kv heads of 64).
"""

from __future__ import annotations

import argparse
import torch
from common import median_seconds, report

from nnterp_widgets.components.vllm.attention import recompute_scores
from nnterp_widgets.requests import attention as attention_requests

SCALE = 0.125


def _scored(cut: bool, whole_keys: torch.Tensor):
    """A `probability_rows` stand-in: the cut keys as given, or every key then cut."""

    def rows(attention, queries, keys, start, stop):
        seen = keys.shape[2]
        scored = keys if cut else whole_keys
        scores = recompute_scores(queries[0].transpose(0, 1), scored[0].transpose(0, 1), SCALE, rows=(start, stop))
        return torch.softmax(scores, dim=-1)[:, :, :seen]

    return rows


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lengths", nargs="?", default="4096,8192")
    parser.add_argument("--rows", default="32,256", help="row blocks to time, in MiB")
    parser.add_argument("--heads", type=int, default=9)
    parser.add_argument("--kv-heads", type=int, default=3)
    parser.add_argument("--head-dim", type=int, default=64)
    args = parser.parse_args([] if argv is None else argv)
    rows = []
    generator = torch.Generator().manual_seed(0)
    for tokens in [int(n) for n in args.lengths.split(",")]:
        queries = torch.randn(1, args.heads, tokens, args.head_dim, generator=generator)
        keys = torch.randn(1, args.kv_heads, tokens, args.head_dim, generator=generator)
        block = attention_requests.pattern_block(tokens)
        for rows_bytes in [int(n) * 2**20 for n in args.rows.split(",")]:
            found = {}
            for cut in (False, True):
                attention_requests.probability_rows = _scored(cut, keys)
                payload = []

                def run():
                    payload[:] = [attention_requests.pattern_payload(None, queries, keys, block, rows_bytes=rows_bytes)]

                found[cut] = (median_seconds(run, repeat=3, warmup=1), payload[0])
            (whole_s, whole), (cut_s, kept) = found[False], found[True]
            assert (whole[0] == kept[0]).all(), "the cut changed a shipped cell"
            torch.testing.assert_close(torch.from_numpy(whole[1]), torch.from_numpy(kept[1]), rtol=1e-5, atol=1e-7)
            label = f"{rows_bytes // 2**20} MiB rows"
            rows.append(
                (
                    f"{tokens} tokens, {label}",
                    f"all keys {whole_s * 1e3:.0f} ms, cut {cut_s * 1e3:.0f} ms ({cut_s / whole_s:.2f}x)",
                )
            )
    return report("The shown pattern's arithmetic: keys cut at each row block's last query (CPU)", rows)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
