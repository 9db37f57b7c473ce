"""runtime/waiting.py: an interruptible wait that starts with short polls, so that a chunk of a
few milliseconds (a GPU's) is not held to the 20 ms poll that keeps Ctrl-C prompt."""

from __future__ import annotations

from jaxrl_sys.runtime import waiting


class _Later:
    """An array stand-in that is ready after `polls` checks."""

    def __init__(self, polls: int):
        self.polls = polls

    def is_ready(self) -> bool:
        self.polls -= 1
        return self.polls < 0


def test_wait_ready_polls_from_half_a_millisecond_doubling_to_20(monkeypatch):
    pauses: list[float] = []
    monkeypatch.setattr(waiting.time, "sleep", pauses.append)
    leaf = _Later(polls=9)
    assert waiting.wait_ready([leaf]) == [leaf]
    assert pauses == [0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.02, 0.02, 0.02]
