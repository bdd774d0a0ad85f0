"""The session's questions over a list of prompts: ``session.each(prompts)``.

    batch = session.each(["The capital of France is", "The capital of Italy is"])
    lens = batch.prompt(window=1).result()            # Results of PromptResult, in order
    lens.mean()                                       # the lens's top-1 agreement per layer
    parts = batch.attribute([" Paris", " Rome"]).result().to_pandas()

Each question is one `Job` over the whole list: many prompts an engine request (the
single request's reads; prompts whose reads take the same arguments share one
registration, the others an invoke each), progress counted in prompts, a partial
`Results` as chunks land, a cancel honoured at the next chunk. A prompt the engine
cannot take (too long, say) gets its error in its slot; the others are answered.
"""

from __future__ import annotations

from typing import Any

from .. import interventions, requests
from .job import Job


class Batch:
    """A list of prompts and the session that answers them (`Session.each`).

    Args:
        session: the session whose engine answers.
        prompts: texts or token id lists (not both), a tuple, or a pandas column.
    """

    def __init__(self, session: Any, prompts: Any) -> None:
        self._session = session
        self.prompts: tuple = tuple(requests.check_batch(prompts))

    def __len__(self) -> int:
        return len(self.prompts)

    def __repr__(self) -> str:
        return f"<Batch of {len(self.prompts)} prompts>"

    def _ask(self, question: requests.Question, prepare, *, key, progress, bytes_each=None) -> Job[requests.Results]:
        prompts, limit = list(self.prompts), self._session.max_result_bytes
        return self._session.submit(
            lambda engine, job: requests.run_each(
                engine, prompts, question, prepare, job, bytes_each=bytes_each, max_bytes=limit
            ),
            key=key,
            what=f"{question.kind} over {len(prompts)} prompts",
            progress=progress,
        )

    def prompt(
        self, *, window: Any = 1, layer: int | None = None, key: str | None = None, progress: bool = False
    ) -> Job[requests.Results]:
        """`Session.prompt` of every prompt: the tokens, the model's top-k, the lens over
        ``window`` positions (the last one by default) and one layer's pattern.

        Returns:
            A `Job` of `Results` of `PromptResult`; ``mean()`` is the lens's per-layer
            top-1 probability and agreement with the model's prediction at the last position.
        """
        limit = self._session.max_result_bytes

        def prepare(model, index, prompt):
            return requests.prompt_plan(model, prompt, layer=layer, window=window, max_bytes=limit)

        def bytes_each(model, ids):
            start, stop = requests.lens_window(len(ids), window)
            return requests.prompt_bytes(model, len(ids), stop - start, requests.LENS_K, True)

        return self._ask(requests.PROMPT_QUESTION, prepare, key=key, progress=progress, bytes_each=bytes_each)

    def lens(self, width: int = 1, *, key: str | None = None, progress: bool = False) -> Job[requests.Results]:
        """`Session.lens` over the last ``width`` positions of every prompt.

        Returns:
            A `Job` of `Results` of `LensGrid`; ``mean()`` as for `prompt`.
        """
        limit = self._session.max_result_bytes

        def prepare(model, index, prompt):
            ids = requests.check_prompt(model, prompt)  # tokenised once: the plan takes the ids
            return requests.lens_plan(model, ids, max(0, len(ids) - int(width)), len(ids), max_bytes=limit)

        def bytes_each(model, ids):
            return requests.lens_bytes(model.num_layers, min(int(width), len(ids)), requests.LENS_K)

        return self._ask(requests.LENS_QUESTION, prepare, key=key, progress=progress, bytes_each=bytes_each)

    def attribute(
        self, answers, foils=None, *, position: int = -1, key: str | None = None, progress: bool = False
    ) -> Job[requests.Results]:
        """`Session.attribute` of every prompt.

        Args:
            answers, foils: one token for every prompt, or a list of one per prompt
                (``foils=None``: the metric is logit(answer) alone).
            position: where the metric is read in every prompt (the last by default).

        Returns:
            A `Job` of `Results` of `Attribution`; ``mean()`` is each part's mean effect.
        """
        count = len(self.prompts)
        answers = requests.per_prompt(answers, count, "answers")
        foils = requests.per_prompt(foils, count, "foils")

        def prepare(model, index, prompt):
            return requests.attribution_plan(model, prompt, answers[index], foils[index], position)

        return self._ask(requests.ATTRIBUTION_QUESTION, prepare, key=key, progress=progress)

    def head_roles(self, *, key: str | None = None, progress: bool = False) -> Job[requests.Results]:
        """`Session.head_roles` of every prompt.

        Returns:
            A `Job` of `Results` of `HeadRoles`; ``mean()`` is a `HeadRoles` of the mean
            scores (NaN-aware: a role scored on some prompts only is their mean).
        """

        def prepare(model, index, prompt):
            return requests.roles_plan(model, prompt)

        return self._ask(requests.ROLES_QUESTION, prepare, key=key, progress=progress)

    def patterns(self, layers: Any = None, *, key: str | None = None, progress: bool = False) -> Job[requests.Results]:
        """Each head's attention summarised over every prompt (not every pattern): the
        mean row entropy and how far back it looks, per listed layer (all by default).

        Returns:
            A `Job` of `Results` of `PatternStats`, each what ``session.patterns(prompt,
            layers).result().stats()`` gives; ``mean()`` is their mean.
        """

        def prepare(model, index, prompt):
            return requests.stats_plan(model, prompt, layers)

        return self._ask(requests.STATS_QUESTION, prepare, key=key, progress=progress)

    def value(
        self, value_id: str, reduce: str = "last", *, key: str | None = None, progress: bool = False
    ) -> Job[requests.Results]:
        """One standard value of every prompt, reduced to one vector: at the last token
        (``reduce="last"``) or its mean over the tokens (``"mean"``).

        Returns:
            A `Job` of `Results` of float32 numpy vectors; ``mean()`` is their mean.
        """
        requests.check_reduce(reduce)

        def prepare(model, index, prompt):
            return requests.vector_plan(model, prompt, value_id, reduce)

        return self._ask(requests.VECTOR_QUESTION, prepare, key=key, progress=progress)

    def generate(
        self, max_tokens: int = requests.GENERATE_TOKENS, *, key: str | None = None, progress: bool = False, **sampling
    ) -> Job[requests.Results]:
        """`Session.generate` of every prompt: many prompts decode together.

        Returns:
            A `Job` of `Results` of `GenerationResult`.
        """
        prompts = list(self.prompts)
        return self._session.submit(
            lambda engine, job: requests.generate_each(engine, prompts, max_tokens, progress=job, **sampling),
            key=key,
            what=f"generation over {len(prompts)} prompts",
            progress=progress,
        )

    def steer(
        self,
        vector,
        layer: int,
        coefficient: float = 1.0,
        max_tokens: int = requests.GENERATE_TOKENS,
        *,
        key: str | None = None,
        progress: bool = False,
        **sampling,
    ) -> Job[requests.Results]:
        """`Session.steer` of every prompt: each continued with the vector and without.

        Returns:
            A `Job` of `Results` of `SteerResult`.
        """
        prompts = list(self.prompts)
        return self._session.submit(
            lambda engine, job: interventions.steer_each(
                engine, prompts, vector, layer, coefficient, max_tokens, progress=job, **sampling
            ),
            key=key,
            what=f"steering over {len(prompts)} prompts",
            progress=progress,
        )
