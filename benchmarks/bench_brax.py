"""Our PPO/SAC/ES/ARS against Brax's own trainers on one Brax task: `python benchmarks/bench_brax.py`.

Side by side in one run, on the same env (task, backend, episode bound of 1000), number of
envs, env steps and hyper-parameters (ours are the task's shipped defaults; Brax's trainer
gets the same values through its own arguments, its batch arranged so that one update round
consumes the same env steps, and bootstraps at the time limit as ours does where the task marks
it, else masks the truncated steps (Brax's own way); its networks are
given our hidden sizes and activation). Reports for each: env-steps/s of training over the
second half of the run's steps (ours from train.py's per-chunk log, run with no greedy
evaluation at chunk ends; Brax's the `training/sps` of the second of two training epochs), so
neither side's rate holds compilation, evaluation or SAC's replay prefill; the wall seconds of
the whole run (compilation, the prefill, our final checkpoint and Brax's own evaluations
included); and the return of a deterministic policy over 16 episodes, run by the same
evaluator (jaxrl_sys.evaluation on our Brax adapter) for both.

    python benchmarks/bench_brax.py --env inverted_pendulum --agents ppo
    python benchmarks/bench_brax.py --env hopper --agents ppo,sac --steps 1000000
    python benchmarks/bench_brax.py --env inverted_pendulum --agents es,ars --steps 4000000

ES and ARS: our population of P members is Brax's P/2 perturbations with their antithetic
twins (`population_size`, `number_of_directions`), ARS's top fraction its `top_directions`;
both sides' env-steps/s count every simulated step (Brax's `training/sps` is envs x episode
length per epoch, as ours). Their budgets differ in what they count: ours every simulated
step, Brax's only the steps inside episodes, so on a task whose episodes end early Brax runs
more generations for the same `--steps`.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
EVAL_RETURN = re.compile(r"^return ([-\d.]+) \+- ([\d.]+)", re.MULTILINE)
EVAL_EPISODES = 16


def ours(agent: str, task: str, steps: int, overrides: list[str], root: str) -> dict:
    """Train with train.py (the task's defaults), then evaluate with evaluate.py."""
    start = time.perf_counter()
    train = subprocess.run(
        [sys.executable, str(SCRIPTS / "train.py"), "--agent", agent, "--env", f"brax:{task}",
         "--total-steps", str(steps), "--chunks", "4", "--eval-episodes", "0",
         "--run-root", root, "--no-progress",
         *[a for o in overrides for a in ("--set", o)]],
        capture_output=True, text=True)
    if train.returncode:
        raise SystemExit(f"error: train.py: {train.stderr.strip()[-400:]}")
    seconds = time.perf_counter() - start
    run_dir = sorted(Path(root).iterdir())[-1]
    evaluation = subprocess.run(
        [sys.executable, str(SCRIPTS / "evaluate.py"), str(run_dir), "--episodes",
         str(EVAL_EPISODES)], capture_output=True, text=True)
    if evaluation.returncode:
        raise SystemExit(f"error: evaluate.py: {evaluation.stderr.strip()[-400:]}")
    mean, std = EVAL_RETURN.search(evaluation.stdout).groups()
    return {"rate": second_half_rate(run_dir / "metrics.jsonl"),
            "return": float(mean), "std": float(std), "seconds": seconds}


def second_half_rate(metrics_file: Path) -> float:
    """Env-steps/s over the run's second half of chunks, from train.py's per-chunk log: the
    window Brax's rate covers (its second and last training epoch, see `theirs`)."""
    chunks = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    middle, last = chunks[len(chunks) // 2 - 1], chunks[-1]
    return ((last["env_steps"] - middle["env_steps"])
            / (last["train_seconds"] - middle["train_seconds"]))


def _shim_removed_jax_apis() -> None:
    """Brax's trainers (0.14) call `jax.device_put_replicated`, which this JAX removed; put
    back its one-device case (the bench runs Brax's trainer on one device, as ours)."""
    import jax
    import jax.numpy as jnp

    def device_put_replicated(tree, devices):
        if len(devices) != 1:
            raise NotImplementedError("the shim covers one device")
        return jax.device_put(jax.tree.map(lambda a: jnp.asarray(a)[None], tree), devices[0])

    jax.device_put_replicated = device_put_replicated


def theirs(agent: str, task: str, steps: int, config, backend: str) -> dict:
    """Brax's own trainer with the same env, envs, steps and hyper-parameters."""
    import jax
    import jax.numpy as jnp

    from jaxrl_sys import envs
    from jaxrl_sys.envs.brax_env import import_brax_envs
    from jaxrl_sys.core.evaluation import evaluate

    import_brax_envs()  # quietly, before brax.training imports it
    _shim_removed_jax_apis()
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo_train
    from brax.training.agents.sac import networks as sac_networks
    from brax.training.agents.sac import train as sac_train
    from brax.training.agents.es import networks as es_networks
    from brax.training.agents.es import train as es_train
    from brax.training.agents.ars import train as ars_train

    adapter = envs.make(f"brax:{task}", backend=backend, episode_stats=False)
    activation = {"tanh": jnp.tanh, "relu": jax.nn.relu, "silu": jax.nn.silu}[config.activation]
    rates: list[float] = []  # num_evals=3: two training epochs; the second is the measured half

    def progress(step: int, metrics: dict) -> None:  # an evaluation at step 0 has no rate
        if "training/sps" in metrics:
            rates.append(float(metrics["training/sps"]))

    start = time.perf_counter()
    if agent == "ppo":
        network = functools.partial(
            ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=config.hidden,
            value_hidden_layer_sizes=config.hidden, activation=activation)
        make_policy, params, _ = ppo_train.train(
            adapter.brax_env, num_timesteps=steps, num_envs=config.num_envs,
            episode_length=adapter.spec.max_episode_steps, unroll_length=config.rollout_steps,
            batch_size=config.num_envs // config.num_minibatches,
            num_minibatches=config.num_minibatches, num_updates_per_batch=config.update_epochs,
            learning_rate=config.learning_rate, entropy_cost=config.ent_coef,
            discounting=config.gamma, gae_lambda=config.gae_lambda,
            clipping_epsilon=config.clip_eps, vf_loss_coefficient=config.vf_coef,
            max_grad_norm=config.max_grad_norm, reward_scaling=config.reward_scale,
            normalize_observations=config.normalize_obs,
            # Brax bootstraps at the time limit only for tasks that mark it (`time_out` in
            # their info, e.g. inverted_pendulum); elsewhere its loss masks truncated steps
            bootstrap_on_timeout="time_out" in jax.eval_shape(
                adapter.brax_env.reset, jax.random.PRNGKey(0)).info,
            network_factory=network, num_evals=3, run_evals=False, progress_fn=progress,
            max_devices_per_host=1)
    elif agent == "es":
        network = functools.partial(es_networks.make_es_networks,
                                    hidden_layer_sizes=config.hidden, activation=activation)
        make_policy, params, _ = es_train.train(
            adapter.brax_env, num_timesteps=steps, episode_length=config.rollout_steps,
            population_size=config.population // 2, learning_rate=config.learning_rate,
            perturbation_std=config.noise_std, l2coeff=config.weight_decay,
            fitness_shaping=es_train.FitnessShaping.CENTERED_RANK,
            normalize_observations=config.normalize_obs, network_factory=network,
            deterministic_eval=True, num_evals=3, progress_fn=progress, max_devices_per_host=1)
    elif agent == "ars":
        directions = config.population // 2
        make_policy, params, _ = ars_train.train(
            adapter.brax_env, num_timesteps=steps, episode_length=config.rollout_steps,
            number_of_directions=directions,
            top_directions=max(1, int(config.top_fraction * directions)),
            step_size=config.learning_rate, exploration_noise_std=config.noise_std,
            normalize_observations=config.normalize_obs, num_evals=3, progress_fn=progress,
            max_devices_per_host=1)
    else:
        network = functools.partial(sac_networks.make_sac_networks,
                                    hidden_layer_sizes=config.hidden, activation=activation)
        make_policy, params, _ = sac_train.train(
            adapter.brax_env, num_timesteps=steps, num_envs=config.num_envs,
            episode_length=adapter.spec.max_episode_steps, batch_size=config.batch_size,
            grad_updates_per_step=config.updates_per_step, learning_rate=config.critic_learning_rate,
            discounting=config.gamma, tau=config.tau, reward_scaling=config.reward_scale,
            normalize_observations=config.normalize_obs, min_replay_size=config.learning_starts,
            max_replay_size=config.buffer_size, network_factory=network,
            num_evals=3, progress_fn=progress, max_devices_per_host=1)
    seconds = time.perf_counter() - start
    policy = make_policy(params) if agent == "ars" else make_policy(params, deterministic=True)
    greedy = lambda _, obs, key, **kw: policy(obs, key)[0]  # noqa: E731
    returns, _ = jax.jit(lambda key: evaluate(envs.make(f"brax:{task}", backend=backend),
                                              greedy, None, key, jnp.arange(EVAL_EPISODES)))(
        jax.random.PRNGKey(0))
    returns = jax.device_get(returns)
    return {"rate": rates[-1], "return": float(returns.mean()),
            "std": float(returns.std()), "seconds": seconds}


def bench(args: argparse.Namespace) -> int:
    """Both sides for every agent asked for, then one Markdown table."""
    from jaxrl_sys import agents
    from jaxrl_sys import envs
    from jaxrl_sys.runtime.cli import UsageError
    from jaxrl_sys.core.config import apply_overrides, split_env_overrides

    config_overrides, env_kwargs = split_env_overrides(args.overrides)
    if set(env_kwargs) - {"backend"}:
        raise UsageError("bench_brax.py compares at episode_length 1000; env.backend is the "
                         "one env setting it takes")
    backend = str(env_kwargs.get("backend", "generalized"))
    envs.make(f"brax:{args.env}", backend=backend)  # a bad task or backend: one line
    configs = {}
    for agent in args.agents.split(","):  # every config checked before anything trains
        if agent not in ("ppo", "sac", "es", "ars"):
            raise UsageError(f"--agents: {agent!r} is not ppo, sac, es or ars")
        configs[agent] = apply_overrides(
            agents.load(agent).default_config(f"brax:{args.env}"), config_overrides)
    print(f"| brax:{args.env} ({backend}) | agent | env steps | envs | return "
          f"({EVAL_EPISODES} deterministic episodes) | training env-steps/s | wall seconds |")
    print("|---|---|---:|---:|---:|---:|---:|", flush=True)
    for agent, config in configs.items():  # each agent's rows as soon as they are measured
        steps = args.steps or config.total_steps
        with tempfile.TemporaryDirectory() as root:
            our = ours(agent, args.env, steps, args.overrides, root)
        their = theirs(agent, args.env, steps, config, backend)
        for name, r in (("jaxrl_sys", our), ("brax.training", their)):
            print(f"| {name} | {agent} | {steps:,} | {config.num_envs} | {r['return']:.1f} ± "
                  f"{r['std']:.1f} | {r['rate']:,.0f} | {r['seconds']:.0f} |")
        print(f"| ratio (ours / Brax's) | {agent} | | | | {our['rate'] / their['rate']:.2f} | |",
              flush=True)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Exit code: 0 done, 2 bad input, 130 interrupted."""
    from jaxrl_sys.runtime.cli import Parser, UsageError, guarded
    from jaxrl_sys.runtime.devices import set_safe_cpu_flags

    set_safe_cpu_flags()  # Brax's trainer under the XLA:CPU flags train.py runs ours with
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="inverted_pendulum", help="Brax task")
    parser.add_argument("--agents", default="ppo", help="comma-separated: ppo, sac, es, ars")
    parser.add_argument("--steps", type=int, default=None,
                        help="env steps (default: the task's shipped total_steps)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="config override for both sides")
    from jaxrl_sys import agents
    from jaxrl_sys import envs
    from jaxrl_sys.core.config import ConfigError

    return guarded(lambda: bench(parser.parse_args(argv)),
                   (UsageError, ConfigError) + agents.USER_ERRORS + envs.USER_ERRORS)


if __name__ == "__main__":
    from jaxrl_sys.runtime.cli import run_script

    run_script(main)
