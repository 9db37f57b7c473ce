"""benchmarks/search_gain.py: its refusals, one line and exit 2 before any run is opened."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "search_gain.py"
spec = importlib.util.spec_from_file_location("search_gain_script", SCRIPT)
search_gain = importlib.util.module_from_spec(spec)
spec.loader.exec_module(search_gain)


@pytest.mark.parametrize("args, words", [
    (["--simulations", "16,many"], "--simulations takes integers"),
    (["--episodes", "0"], "must be at least 1"),
    (["--probe-steps", "-1"], "--probe-steps must be at least 0"),
    ([], "no run directory"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, words):
    assert search_gain.main([str(tmp_path / "missing"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_the_one_step_model_probe_is_bounded_and_repeats():
    """The probe's agreements are fractions, its gaps and spreads non-negative, and the same
    parameters and key give the same figures."""
    import dataclasses

    import jax

    from jaxrl_sys import envs
    from jaxrl_sys.agents.muzero import agent as muzero

    env = envs.make("Catch-bsuite")
    config = dataclasses.replace(muzero.Config(), hidden=(16,), latent_dim=8, support_bins=11,
                                 num_simulations=4)
    agent = muzero.make(env, config)
    state = agent.init(jax.random.PRNGKey(0))
    network = muzero.build_network(env.spec, config)

    def probe():
        return search_gain.one_step_model_accuracy(env, network, config, state,
                                                   muzero.greedy_action(agent), 4, 3,
                                                   jax.random.PRNGKey(1))

    first = probe()
    assert 0 <= first["model_best_agrees"] <= 1 and 0 <= first["prior_best_agrees"] <= 1
    assert min(first["value_gap"], first["model_q_spread"], first["real_q_spread"]) >= 0
    assert probe() == first
