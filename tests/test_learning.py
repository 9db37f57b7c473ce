"""Learning tests: every promised (agent, env) pair learns with its shipped defaults.

Each test trains a case of `jaxrl_sys.tools.learning_check.CASES` exactly as
`scripts/check_learning.py` does (the config and chunking of `scripts/train.py`, greedy
evaluation at every chunk's end) on four seeds, and judges with the margin that the 16-seed
measurement under every code-generation setting supports (README, "Learning checks"): the
defaults meet the rule there (15 of 16 seeds reach the threshold, none that did ends more than
5% below it), so here at least 3 of 4 seeds must reach the threshold and the median seed must
end above the collapse floor. No test leans on one machine's trajectory: `.ci/run` runs these
again under another `--xla_cpu_max_isa`.
"""

import numpy as np
import pytest

from jaxrl_sys import agents
from jaxrl_sys import envs
from jaxrl_sys.tools import learning_check as lc

SEEDS = [0, 1, 2, 3]
DEVICE_CASES = ["ppo:CartPole-v1", "ppo:Acrobot-v1", "ppo:Pendulum-v1", "dqn:CartPole-v1",
                "sac:Pendulum-v1", "sac:MountainCarContinuous-v0"]


def check(result: lc.CaseResult) -> None:
    verdict = lc.judge(result)
    detail = (f"{result.case}: final {np.round(verdict.final, 1).tolist()}, reached "
              f"{verdict.reached.tolist()} (threshold {result.threshold:g})")
    print(detail)
    assert np.all(np.isfinite(result.train_returns[-1])), detail
    assert verdict.reached.sum() >= len(SEEDS) - 1, detail
    assert np.median(verdict.final) >= lc.collapse_floor(result.threshold), detail


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.parametrize("name", DEVICE_CASES)
def test_agent_learns_its_promised_env(name):
    case = lc.find_case(name)
    check(lc.run_case(case, agents.load(case.agent), envs, SEEDS))


def test_every_promised_pair_has_a_case():
    """The README's agents table and the learning tests draw from the same case list."""
    names = {case.name for case in lc.CASES}
    assert set(DEVICE_CASES) <= names
    assert {"ppo:gymnasium:CartPole-v1", "muzero:CartPole-v1"} <= names


def test_judge_applies_the_rule():
    """15 of 16 reaching passes; a seed that reached and fell past 5% below fails."""
    curves = np.full((3, 16), 500.0)
    curves[:, 0] = [100.0, 200.0, 300.0]  # never reached
    result = lc.CaseResult("x", "native", list(range(16)), 475.0, [1, 2, 3], curves, None, 0.0)
    assert lc.judge(result).passed and lc.judge(result).worst_seed == 0
    curves[2, 1] = 451.5  # reached, ends just above 475 - 5% = 451.25: still fine
    assert lc.judge(result).passed
    curves[2, 1] = 451.0  # below the floor
    verdict = lc.judge(result)
    assert not verdict.passed and verdict.collapsed.tolist() == [False, True] + [False] * 14
    negative = lc.CaseResult("y", "native", [0], -200.0, [1, 2], np.array([[-190.0], [-211.0]]),
                             None, 0.0)
    assert lc.collapse_floor(-200.0) == -210.0 and not lc.judge(negative).passed


def test_settings_follow_the_cpu():
    avx512 = "flags\t: fpu sse4_2 avx avx2 avx512f\n"
    assert lc.available_settings(avx512) == (["native", "AVX2", "AVX", "SSE4_2"],
                                             "native is AVX512 on this CPU")
    avx2 = "flags\t: fpu sse4_2 avx avx2\n"
    assert lc.available_settings(avx2)[0] == ["native", "AVX", "SSE4_2"]
