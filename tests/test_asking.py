"""One way to ask, without an engine: a fake session whose answers the test hands out,
driving a real view (`OcclusionPanel`) through its newest-answer, coalescing, dimming
and error paths. What the engine computes is tested against transformers elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from nnterp_widgets.interventions import Occlusion
from nnterp_widgets.requests import RequestRefused, Tokens
from nnterp_widgets.session import Job, Superseded
from nnterp_widgets.widgets.lifecycle import STALE, STOPPED
from nnterp_widgets.widgets.occlusion import OcclusionPanel


def occlusion(prompt: str, shift: float = 0.0) -> Occlusion:
    return Occlusion(
        prompt=prompt,
        tokens=Tokens((1, 2, 3), ("a", " b", " c")),
        answer=5,
        answer_text=" x",
        mode="replace",
        neutral=9,
        neutral_text=" ",
        clean_logit=2.0,
        clean_prob=0.5,
        logits=np.array([1.0, 2.5, 2.0]) + shift,
        probs=np.array([0.25, 0.6, 0.5]),
        requests=1,
    )


class FakeSession:
    """Hands out a job per request, as the session does; the test decides when each lands
    (the coalescing rule of the real worker: a newer job under a key supersedes a waiting one)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Job]] = []
        self._waiting: dict[str, Job] = {}

    def occlude(self, prompt, answer, mode="replace", *, key=None, progress=False) -> Job:
        if answer == "":
            raise RequestRefused("the answer is empty")
        job: Job = Job("occlusion")
        job.set_running_or_notify_cancel()
        previous = self._waiting.get(key)
        if previous is not None and not previous.done():
            previous.set_exception(Superseded("a newer request replaced this one"))
        self._waiting[key] = job
        self.asked.append((prompt, job))
        return job


@pytest.fixture
def panel():
    session = FakeSession()
    prompt = ["The Eiffel Tower is in"]
    view = OcclusionPanel(session, lambda: prompt[0])
    view.prompts = prompt
    yield view
    view.close()


def test_the_newest_answer_is_shown_and_an_older_one_landing_late_is_not(panel):
    panel.run()
    panel.prompts[0] = "The Colosseum is in"
    panel.run()
    (_, first), (_, second) = panel.session.asked
    assert first.exception() is not None and isinstance(first.exception(), Superseded)  # coalesced
    second.finish(occlusion("The Colosseum is in"))
    assert panel.wait(5).prompt == "The Colosseum is in"
    assert panel.text_view in panel.children and panel.text_view.tokens == ["a", "␣b", "␣c"]  # drawn


def test_an_answer_landing_after_a_newer_request_is_dropped(panel):
    panel.run()
    (_, first) = panel.session.asked[0]
    panel.session._waiting.clear()  # the first already runs: no supersession, it lands late
    panel.run()
    (_, second) = panel.session.asked[1]
    first.finish(occlusion("late"))
    assert panel.occlusion is None and not panel._idle.is_set()  # the newer one is still on its way
    second.finish(occlusion("newest"))
    assert panel.wait(5).prompt == "newest"


def test_an_error_is_shown_in_the_view_re_raised_by_wait_and_the_next_request_is_served(panel):
    panel.run()
    (_, job) = panel.session.asked[0]
    job.set_exception(RequestRefused("the prompt is 9000 tokens, and this engine takes at most 511"))
    with pytest.raises(RequestRefused, match="at most 511"):
        panel.wait(5)
    assert panel.status["state"] == "error" and "at most 511" in panel.status["message"]
    panel.run()
    panel.session.asked[-1][1].finish(occlusion("The Eiffel Tower is in"))
    assert panel.wait(5).prompt == "The Eiffel Tower is in"
    assert panel.status["state"] == "idle"


def test_an_answer_left_under_an_error_is_dimmed_and_said_to_be_the_earlier_one(panel):
    panel.run()
    panel.session.asked[0][1].finish(occlusion("The Eiffel Tower is in"))
    panel.wait(5)
    assert STALE not in panel._dom_classes
    panel.answer_box.value = ""  # refused before any request
    panel.run()
    with pytest.raises(RequestRefused):
        panel.wait(1)
    assert STALE in panel._dom_classes and "earlier one" in panel.message.value and "Eiffel" in panel.message.value
    assert "empty" in panel.status["message"]  # the error itself, whole, on the status line
    panel.answer_box.value = " Paris"
    panel.run()
    panel.session.asked[-1][1].finish(occlusion("The Eiffel Tower is in", 1.0))
    panel.wait(5)
    assert STALE not in panel._dom_classes and panel.message.value == ""


def test_bad_input_refused_before_any_request_is_shown_at_once(panel):
    panel.answer_box.value = ""
    panel.run()
    assert panel.session.asked == []
    with pytest.raises(RequestRefused, match="empty"):
        panel.wait(1)
    assert "empty" in panel.status["message"]


def test_a_view_of_an_earlier_prompt_is_dimmed_and_a_fresh_answer_clears_it(panel):
    panel.run()
    panel.session.asked[0][1].finish(occlusion("The Eiffel Tower is in"))
    panel.wait(5)
    panel.mark_stale("The Colosseum is in")
    assert STALE in panel._dom_classes and "earlier prompt" in panel.message.value
    panel.mark_stale("The Eiffel Tower is in")  # back to the prompt shown: not stale
    assert STALE not in panel._dom_classes
    panel.mark_stale("The Colosseum is in")
    panel.prompts[0] = "The Colosseum is in"
    panel.run()
    panel.session.asked[-1][1].finish(occlusion("The Colosseum is in", 1.0))
    panel.wait(5)
    assert STALE not in panel._dom_classes and panel.message.value == ""


def test_a_cancelled_request_shows_nothing_and_ends_the_wait(panel):
    panel.run()
    job = panel.session.asked[0][1]
    job.cancel()
    job.end_cancelled()  # what the worker does at the request's next chunk
    assert job.cancelled()
    assert panel.wait(5) is None and panel.status["state"] == "idle"
    assert panel.status["message"] == STOPPED


def test_the_export_section_is_the_answer_shown(panel):
    assert panel.export_section() == ""
    panel.run()
    panel.session.asked[0][1].finish(occlusion("The Eiffel Tower is in"))
    panel.wait(5)
    section = panel.export_section()
    assert "occlusion" in section and 'id="nnw-occlusion"' in section
