"""The policy server and client (jaxrl_sys.serve): the compiled act over the leaves the policy
reads, bodies, episodes, batching, the HTTP application's refusals, and a real server process
with remote and local clients, concurrent clients, a killed client and bad flags."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from starlette.testclient import TestClient

from jaxrl_sys import RunSpec, agents, envs, resolve, run
from jaxrl_sys.core.types import RecurrentPolicy
from jaxrl_sys.serve import codec
from jaxrl_sys.serve.app import build_app
from jaxrl_sys.serve.batcher import Batcher
from jaxrl_sys.serve.codec import RequestError
from jaxrl_sys.serve.episodes import EpisodeTable
from jaxrl_sys.serve.loading import ServeError, build_program, served_run
from jaxrl_sys.serve.learner import ClientLearner, episode_steps, rollout_of
from jaxrl_sys.serve.episodes import FinishedEpisode
from jaxrl_sys.serve.program import (Manifest, PolicyProgram, batch_sizes, greedy_acting,
                                     read_leaves)
from jaxrl_sys.serve.service import PolicyService, ServeSettings
from jaxrl_sys.serve.process import start_server_process


def trained(tmp_path_factory, name: str, *overrides: str):
    """A short run's directory (the protocol, not the policy's quality, is under test)."""
    spec = RunSpec(agent="ppo", env="CartPole-v1", total_steps=4096, seeds=1, chunks=1,
                   run_root=str(tmp_path_factory.mktemp(name)), progress=False, eval_episodes=0,
                   overrides=overrides)
    return run(spec, agents.load, envs).run_dir


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    return trained(tmp_path_factory, "ppo")


# --- the compiled act ------------------------------------------------------------------------


def test_batch_sizes_are_powers_of_two_up_to_the_largest():
    assert batch_sizes(1) == (1,)
    assert batch_sizes(8) == (1, 2, 4, 8)
    assert batch_sizes(48) == (1, 2, 4, 8, 16, 32, 48)


def test_only_the_leaves_the_policy_reads_are_kept():
    state = {"params": jnp.ones((4, 2)), "optimiser": jnp.zeros(7), "replay": jnp.zeros((100, 4))}

    def policy(state, obs, key, legal=None, env_state=None):
        return jnp.argmax(obs @ state["params"], axis=-1)

    program = PolicyProgram(greedy_acting(policy), state, (4,), "float32", max_batch=4)
    assert program.manifest.used == (1,)  # sorted keys: optimiser, params, replay
    obs = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    actions, extras, memory = program.act(program.leaves_of(state), obs, np.ones(3, bool),
                                          [None] * 3, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(actions, np.argmax(obs @ np.ones((4, 2)), -1))
    assert memory == [None] * 3 and extras == [{}] * 3 and program.extras == {}
    assert Manifest.from_dict(program.manifest.to_dict()) == program.manifest


def test_recurrent_memory_is_carried_per_row_and_reset_at_starts():
    def step(state, memory, obs, starts, key, legal=None, env_state=None):
        memory = jnp.where(starts[:, None], 0.0, memory) + obs
        return (memory[:, 0] * state).astype(jnp.int32), memory

    policy = RecurrentPolicy(initial=lambda b: jnp.zeros((b, 1)), step=step)
    program = PolicyProgram(greedy_acting(policy), jnp.float32(1.0), (1,), "float32",
                            max_batch=4)
    assert program.recurrent and read_leaves(jnp.float32(1.0), program.acting, (1,),
                                             "float32", program.row_memory) == (0,)
    leaves, key = program.leaves_of(jnp.float32(1.0)), jax.random.PRNGKey(0)
    rows = [program.row_memory] * 3
    actions, _, rows = program.act(leaves, np.asarray([[1.0], [2.0], [3.0]], np.float32),
                                   np.ones(3, bool), rows, key)
    actions, _, rows = program.act(leaves, np.asarray([[1.0], [2.0], [3.0]], np.float32),
                                   np.asarray([False, True, False]), rows, key)
    np.testing.assert_array_equal(actions, [2, 2, 6])  # row 1 began again


# --- bodies ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [codec.JSON, codec.MSGPACK])
def test_arrays_round_trip_in_both_formats(kind):
    array = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    body = codec.encode({"obs": codec.pack_array(array, kind)}, kind)
    back = codec.array_field(codec.decode(body, kind), "obs", (2, 3), "float32")
    np.testing.assert_array_equal(back, array)


@pytest.mark.parametrize("payload, status, words", [
    ({}, 422, "missing field 'obs'"),
    ({"obs": [1.0, 2.0]}, 422, "shape [2], expected [4]"),
    ({"obs": [1.0, float("nan"), 0.0, 0.0]}, 422, "NaN"),
    ({"obs": ["a", "b", "c", "d"]}, 422, "not an array of numbers"),
    ({"obs": {"dtype": "<f4", "shape": [4], "data": b"\0" * 3}}, 422, "bytes that fill it"),
    ({"obs": {"dtype": "<f4", "shape": [float("inf")], "data": b""}}, 422, "bytes that fill it"),
    ({"obs": [1e39, 0.0, 0.0, 0.0]}, 422, "NaN or infinity (as float32)"),  # finite as float64
    ({"obs": [2 ** 70, 0, 0, 0]}, 422, "not an array of numbers"),
])
def test_malformed_arrays_are_refused_with_one_line(payload, status, words):
    with pytest.raises(RequestError) as caught:
        codec.array_field(payload, "obs", (4,), "float32")
    assert caught.value.status == status and words in caught.value.message
    assert "\n" not in caught.value.message


@pytest.mark.parametrize("payload, words", [
    ({"action": 2 ** 32}, "not whole numbers within int32's range"),  # would wrap to 0
])
def test_integers_that_do_not_fit_are_refused(payload, words):
    with pytest.raises(RequestError, match=words):
        codec.array_field(payload, "action", (), "int32")


@pytest.mark.parametrize("reward", [1e300, 2 ** 200, float("nan"), True, "1"])
def test_rewards_are_numbers_of_bounded_magnitude(reward):
    with pytest.raises(RequestError, match="magnitude at most") as caught:
        codec.number_field({"reward": reward}, "reward")
    assert caught.value.status == 422


def test_malformed_bodies_and_types_are_refused():
    with pytest.raises(RequestError, match="not valid json") as caught:
        codec.decode(b"{not json", codec.JSON)
    assert caught.value.status == 400
    with pytest.raises(RequestError, match="must be an object"):
        codec.decode(b"[1, 2]", codec.JSON)
    with pytest.raises(RequestError, match="unsupported content type") as caught:
        codec.media_type("text/plain")
    assert caught.value.status == 415


# --- episodes and batching -------------------------------------------------------------------


def test_episodes_expire_and_hand_aligned_experience_to_the_sink():
    now, finished = [0.0], []
    table = EpisodeTable(lambda: None, timeout=10.0, max_episodes=2, sink=finished.append,
                         clock=lambda: now[0])
    a, b = table.start("a"), table.start()
    with pytest.raises(RequestError, match="already open"):
        table.start("a")
    with pytest.raises(RequestError, match="2 episodes are open") as caught:
        table.start("c")
    assert caught.value.status == 429
    a.add_reward(5.0)  # before the first action: in the return only
    for t in range(3):
        a.record(np.full(2, t, np.float32), np.int32(t))
        a.add_reward(1.0 + t)
    now[0] = 8.0
    table.get("a")
    now[0] = 15.0  # b idle for 15 s, a for 7 s
    assert table.expire() == 1 and list(table.open) == ["a"]
    with pytest.raises(RequestError, match="idle for over 10 s") as caught:
        table.get(b.episode_id)
    assert caught.value.status == 404
    ended = table.end("a", np.zeros(2, np.float32), terminated=False)
    assert ended.total_reward == 11.0 and ended.length == 3
    (episode,) = finished
    np.testing.assert_array_equal(episode.rewards, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(episode.actions, [0, 1, 2])
    assert episode.observations.shape == (3, 2) and not episode.terminated
    assert (table.started, table.ended, table.expired, table.steps_logged) == (2, 1, 1, 3)


def test_concurrent_requests_share_one_batch_and_get_their_own_answers():
    batches = []

    def run_batch(items):
        batches.append(len(items))
        return [item * 10 for item in items]

    async def main():
        batcher = Batcher(run_batch, max_batch=4, window_s=0.05)
        worker = asyncio.create_task(batcher.serve_forever())
        answers = await asyncio.gather(*(batcher.submit(i) for i in range(6)))
        worker.cancel()
        batcher.close()
        return answers

    assert asyncio.run(main()) == [0, 10, 20, 30, 40, 50]
    assert batches == [4, 2]


# --- learning from clients --------------------------------------------------------------------


def finished(lane: int, length: int, terminated: bool, start: float = 0.0) -> FinishedEpisode:
    """A hand-made episode: observation t is [start + t], action t is t % 2, reward t is t."""
    obs = start + np.arange(length, dtype=np.float32)[:, None]
    return FinishedEpisode(f"e{lane}-{start}", obs, np.arange(length) % 2,
                           np.arange(length, dtype=np.float32), np.asarray([start + length],
                                                                           np.float32),
                           terminated, {"log_prob": -np.arange(length, dtype=np.float32)}, lane)


def test_an_episode_becomes_aligned_rollout_rows():
    rows = episode_steps(finished(0, 3, terminated=True))
    assert [float(r["next_obs"][0]) for r in rows] == [1.0, 2.0, 3.0]  # the final obs last
    assert [bool(r["terminated"]) for r in rows] == [False, False, True]
    assert not any(r["truncated"] for r in rows)
    unseen = dataclasses.replace(finished(0, 3, terminated=True), final_obs=None)
    assert [bool(r["terminated"]) for r in episode_steps(unseen)] == [False, False, True]
    cut = episode_steps(finished(0, 2, terminated=False))
    assert [bool(r["truncated"]) for r in cut] == [False, True] and not cut[1]["terminated"]
    rollout = rollout_of([episode_steps(finished(0, 3, True)),
                          episode_steps(finished(1, 4, False, start=10.0))], steps=3)
    assert rollout.obs.shape == (3, 2, 1) and rollout.extras["log_prob"].shape == (3, 2)
    np.testing.assert_array_equal(rollout.obs[:, 1, 0], [10.0, 11.0, 12.0])
    np.testing.assert_array_equal(rollout.terminated[:, 0], [False, False, True])
    np.testing.assert_array_equal(rollout.truncated[:, 1], [False, False, False])  # cut later
    np.testing.assert_array_equal(rollout.env_ids, [0, 1])


def test_the_learner_updates_once_every_lane_holds_a_rollout():
    from jaxrl_sys.core.types import HostFns

    def learn(state, replay, rollout, key):  # compiled: what it saw comes back as metrics
        return state + 1, replay, {"lane0_obs": jnp.sum(rollout.obs[:, 0, 0] * jnp.arange(1, 5)),
                                   "lane0_ends": jnp.sum(rollout.terminated[:, 0] * jnp.arange(1, 5))}

    fns = HostFns(init=lambda key: (jnp.int32(0), None), actor_params=lambda s: s,
                  act=None, learn=learn, num_envs=2, rollout_steps=4)
    updates = []
    learner = ClientLearner(fns, seed=0, total_steps=16,
                            on_update=lambda carry, metrics, status: updates.append(
                                (int(carry["agent_state"]), metrics["lane0_obs"],
                                 metrics["lane0_ends"], status.steps_learned)))
    learner.start()
    learner.add(0, finished(0, 6, True))
    learner.add(1, finished(0, 3, False, start=100.0))
    learner.add(2, finished(1, 3, True, start=200.0))  # lane 1 holds 3 < 4 steps: no update yet
    deadline = time.monotonic() + 30
    while learner.status.episodes < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert updates == [] and learner.error is None
    learner.add(3, finished(1, 9, True, start=300.0))  # lane 0: 9 steps, lane 1: 12 -> 2 updates
    while len(updates) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    learner.stop()
    # lane 0: obs 0, 1, 2, 3, then 4, 5 (its episode's end: the second step) and 100, 101
    assert updates == [(1, 0 + 2 + 6 + 12, 0, 8),
                       (2, 4 + 10 + 300 + 404, 2, 16)] and learner.status.done
    # left waiting: lane 0 the last step of episode 1 (its 3rd), lane 1 episode 3 from step 5
    assert learner.status.lanes == [[1, 2], [3, 5]] and learner.status.steps_waiting == 5
    assert learner.status.unlearned(0, 0) is None and learner.status.unlearned(1, 0) == 2
    assert learner.status.unlearned(2, 1) is None and learner.status.unlearned(4, 0) == 0


def test_after_a_restart_an_emptied_lane_points_past_the_episodes_it_has_taken():
    """Restored with next_episode 10 and both lanes at episode 3, the replayed episodes 3 and
    4 fill one rollout; the emptied lanes then point at episode 5, so a checkpoint now keeps
    episodes 5-9 (still queued, or in the log) for the next restart."""
    from jaxrl_sys.core.types import HostFns
    from jaxrl_sys.serve.learner import LearnerStatus

    fns = HostFns(init=lambda key: (jnp.int32(0), None), actor_params=lambda s: s, act=None,
                  learn=lambda state, replay, rollout, key: (state + 1, replay, {}),
                  num_envs=2, rollout_steps=4)
    seen = []
    learner = ClientLearner(fns, seed=0, total_steps=1000,
                            on_update=lambda carry, metrics, status: seen.append(
                                [list(lane) for lane in status.lanes]))
    learner.status = LearnerStatus(next_episode=10, lanes=[[3, 0], [3, 0]])
    learner.add(3, finished(0, 4, True))
    learner.add(4, finished(1, 4, True))
    learner.start()
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    learner.stop()
    assert seen == [[[5, 0], [5, 0]]]
    assert learner.status.unlearned(5, 0) == 0 and learner.status.unlearned(4, 1) is None
    assert learner.status.episodes == 0  # both counted before the restart


def test_an_episode_with_a_request_under_way_cannot_end():
    table = EpisodeTable(lambda: None, timeout=10.0, max_episodes=4)
    table.start("a").busy = True
    with pytest.raises(RequestError, match="request under way") as caught:
        table.end("a", None, terminated=True)
    assert caught.value.status == 409 and "a" in table.open


def test_the_experience_log_keeps_whole_records_only(tmp_path):
    from jaxrl_sys.serve.experience_log import LOG_FILE, ExperienceLog

    log = ExperienceLog(tmp_path)
    assert [log.append(finished(k % 2, 3 + k, k % 2 == 0, start=10.0 * k)) for k in range(3)] == [
        0, 1, 2]
    log.close()
    with open(tmp_path / LOG_FILE, "ab") as f:
        f.write(b"\x40\0\0\0\0\0\0\0half a record")  # a crash mid-write
    log = ExperienceLog(tmp_path)
    assert log.count == 3 and log.steps() == 3 + 4 + 5
    (index, episode), = list(log.read(2))
    original = finished(0, 5, True, start=20.0)
    assert index == 2 and episode.lane == 0 and episode.terminated
    np.testing.assert_array_equal(episode.observations, original.observations)
    np.testing.assert_array_equal(episode.extras["log_prob"], original.extras["log_prob"])
    assert log.append(finished(1, 2, False)) == 3  # appended after the cut record
    log.close()
    assert [i for i, _ in ExperienceLog(tmp_path).read()] == [0, 1, 2, 3]


# --- the application, in process -------------------------------------------------------------


@pytest.fixture(scope="module")
def served(ppo_run):
    return served_run(ppo_run, agents.load, envs, max_batch=8)


def app_client(served, **settings) -> TestClient:
    return TestClient(build_app(PolicyService(served, ServeSettings(max_batch=8, **settings))))


def test_act_in_json_and_msgpack_is_the_compiled_policys_action(served):
    obs = np.asarray([0.01, -0.2, 0.03, 0.3], np.float32)
    expected, _, _ = served.program.act(served.leaves, obs[None], np.ones(1, bool), [None],
                                        jax.random.PRNGKey(0))
    with app_client(served) as http:
        assert http.get("/health").json()["agent"] == "ppo"
        described = http.get("/v1/policy").json()
        assert described["record"]["env"] == "CartPole-v1" and described["num_actions"] == 2
        episode = http.post("/v1/episodes", json={}).json()["episode_id"]
        answer = http.post(f"/v1/episodes/{episode}/act", json={"obs": obs.tolist()})
        assert answer.status_code == 200 and answer.json()["action"] == int(expected[0])
        body = codec.encode({"obs": codec.pack_array(obs, codec.MSGPACK)}, codec.MSGPACK)
        answer = http.post(f"/v1/episodes/{episode}/act", content=body,
                           headers={"content-type": codec.MSGPACK})
        assert answer.headers["content-type"] == codec.MSGPACK
        action = codec.unpack_array(codec.decode(answer.content, codec.MSGPACK)["action"], "a")
        assert int(action) == int(expected[0])
        assert http.post(f"/v1/episodes/{episode}/log_returns", json={"reward": 1.5}).json() == {
            "return": 1.5}
        answer = http.post(f"/v1/episodes/{episode}/act", json={"obs": obs.tolist(), "reward": 2})
        assert answer.json()["action"] == int(expected[0])  # the reward went along
        assert http.post(f"/v1/episodes/{episode}/end", json={"reward": 0.5}).json() == {
            "return": 4.0, "length": 3}
        leaves = http.get("/v1/params").json()
        assert leaves["version"] == 0
        assert len(leaves["leaves"]) == len(served.program.manifest.used)
        assert http.get("/v1/params", params={"version": "0"}).status_code == 204


def test_a_hundred_malformed_requests_are_refused_and_serving_goes_on(served):
    obs = [0.01, -0.2, 0.03, 0.3]
    with app_client(served, max_body=2048) as http:
        episode = http.post("/v1/episodes", json={}).json()["episode_id"]
        act = f"/v1/episodes/{episode}/act"
        before = http.post(act, json={"obs": obs}).json()
        bad = [
            lambda: http.post(act, content=b"{oops", headers={"content-type": codec.JSON}),
            lambda: http.post(act, json={"obs": obs[:3]}),
            lambda: http.post(act, content=codec.encode({"obs": [float("nan")] + obs[1:]},
                                                        codec.MSGPACK),
                              headers={"content-type": codec.MSGPACK}),
            lambda: http.post(act, json={"observation": obs}),
            lambda: http.post(act, json=[obs]),
            lambda: http.post("/v1/episodes/nobody/act", json={"obs": obs}),
            lambda: http.post(act, content=b"x" * 5000),
            lambda: http.post(act, content=b"{}", headers={"content-type": "text/plain"}),
            lambda: http.post(f"/v1/episodes/{episode}/log_action", json={"obs": obs,
                                                                        "action": 7}),
            lambda: http.post(f"/v1/episodes/{episode}/log_returns", json={"reward": "x"}),
            lambda: http.get("/v1/nowhere"),
            lambda: http.get(act),
        ]
        answers = [bad[i % len(bad)]() for i in range(100)]
        assert all(400 <= a.status_code < 500 for a in answers), [a.status_code for a in answers]
        errors = [codec.decode(a.content, codec.media_type(a.headers["content-type"]))["error"]
                  for a in answers]
        assert all(error and "\n" not in error for error in errors)
        assert http.post(act, json={"obs": obs}).json() == before
        assert http.get("/metrics").json()["requests"]["act 200"] == 2


def test_a_token_is_checked_on_every_request(served):
    with app_client(served, token="s3cret-token") as http:
        assert http.get("/health").status_code == 401
        assert http.get("/health", headers={"authorization": "Bearer wrong-token"}).status_code == 401
        answer = http.post("/v1/episodes", json={})
        assert answer.status_code == 401 and "token" in answer.json()["error"]
        good = {"authorization": "Bearer s3cret-token"}
        assert http.get("/health", headers=good).status_code == 200


@pytest.mark.slow
def test_a_recurrent_policy_keeps_its_memory_per_episode(tmp_path_factory):
    """Two interleaved episodes act as each would alone: memory is kept per episode id."""
    served = served_run(trained(tmp_path_factory, "gru", "memory=gru"), agents.load, envs,
                        max_batch=4)
    assert served.program.recurrent
    observations = np.random.default_rng(0).normal(0, 0.5, (2, 12, 4)).astype(np.float32)

    def actions(http, episode, obs):
        return http.post(f"/v1/episodes/{episode}/act", json={"obs": obs.tolist()}).json()["action"]

    with app_client(served) as http:
        alone = []
        for k in range(2):
            episode = http.post("/v1/episodes", json={}).json()["episode_id"]
            alone.append([actions(http, episode, obs) for obs in observations[k]])
        a, b = (http.post("/v1/episodes", json={}).json()["episode_id"] for _ in range(2))
        together = [[], []]
        for t in range(12):
            together[0].append(actions(http, a, observations[0, t]))
            together[1].append(actions(http, b, observations[1, t]))
    assert together == alone


# --- a server process ------------------------------------------------------------------------


def start_server(*args: str) -> tuple[subprocess.Popen, str]:
    """`jaxrl-serve ... --port 0` in a process of its own, and its address once it serves."""
    return start_server_process(args)


async def concurrent_clients(address: str, clients: int, steps: int) -> list:
    """`clients` episodes acting at once over HTTP; their answers."""
    async with httpx.AsyncClient(base_url=address, timeout=60) as http:
        async def one(i):
            episode = (await http.post("/v1/episodes", json={}))
            episode = episode.json()["episode_id"]
            answers = [await http.post(f"/v1/episodes/{episode}/act",
                                       json={"obs": [0.01 * i, 0.0, 0.0, 0.0]})
                       for _ in range(steps)]
            assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
            return [a.json()["action"] for a in answers]

        return await asyncio.gather(*(one(i) for i in range(clients)))


@pytest.mark.slow
def test_a_server_process_serves_remote_local_and_concurrent_clients(ppo_run):
    from jaxrl_sys.client import PolicyClient

    server, address = start_server(str(ppo_run), "--episode-timeout", "5")
    try:
        remote = PolicyClient(address, inference="remote")
        local = PolicyClient(address, inference="local", binary=False)
        rng = np.random.default_rng(0)
        for _ in range(2):
            remote_id, local_id = remote.start_episode(), local.start_episode()
            for obs in rng.normal(0, 0.1, (20, 4)).astype(np.float32):
                assert remote.get_action(remote_id, obs) == local.get_action(local_id, obs)
                remote.log_returns(remote_id, 1.0)
                local.log_returns(local_id, 1.0)
            assert remote.end_episode(remote_id, obs) == {"return": 20.0, "length": 20}
            assert local.end_episode(local_id, obs) == {"return": 20.0, "length": 20}
        assert local.update_policy_weights() is False  # nothing newer yet

        answers = asyncio.run(concurrent_clients(address, clients=64, steps=3))
        assert len(answers) == 64 and all(len(a) == 3 for a in answers)
        metrics = remote.metrics()
        assert metrics["largest_batch"] > 1 and metrics["episodes"]["steps_logged"] == 80

        # a client that dies mid-episode leaves nothing behind once the timeout passes
        dead = PolicyClient(address)
        dead.get_action(dead.start_episode(), np.zeros(4, np.float32))
        dead.close()
        deadline = time.monotonic() + 20
        while remote.metrics()["episodes"]["open"] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert remote.metrics()["episodes"]["open"] == 0
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)


CHECK = Path(__file__).resolve().parent.parent / "examples" / "check_external_cartpole.py"


@pytest.mark.parametrize("args, words", [
    (["--cases", "sac:remote"], "is not AGENT:INFERENCE"),
    (["--cases", "dqn:somewhere"], "is not AGENT:INFERENCE"),
    (["--parallel", "0"], "--parallel must be at least 1"),
])
def test_the_example_check_refuses_bad_cases_in_one_line(args, words):
    """`.ci/run` trains docs/design/serving.md's example to 475 with DQN and PPO, remote and
    local (`examples/check_external_cartpole.py`); a bad case is one line, exit 2, before any
    server starts."""
    result = subprocess.run([sys.executable, str(CHECK), *args], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr


@pytest.mark.slow
def test_a_killed_learning_server_keeps_every_step_it_acknowledged(tmp_path):
    """SIGKILL after a checkpoint and more acknowledged episodes; `RUN_DIR --learn` restarts
    from the checkpoint and the experience log: learned + waiting = acknowledged steps."""
    from jaxrl_sys.client import PolicyClient

    server, address = start_server("--learn", "--agent", "ppo", "--env", "gymnasium:CartPole-v1",
                                   "--run-root", str(tmp_path), "--checkpoint-every", "2")
    rng, acknowledged, episodes = np.random.default_rng(0), 0, 0
    try:
        client = PolicyClient(address)
        while client.metrics()["learner"]["updates"] < 3 or episodes < 40:
            episode, length = client.start_episode(), int(rng.integers(5, 40))
            for _ in range(length):
                client.get_action(episode, rng.normal(0, 0.1, 4))
                client.log_returns(episode, 1.0)
            assert client.end_episode(episode, rng.normal(0, 0.1, 4))["length"] == length
            acknowledged, episodes = acknowledged + length, episodes + 1
        client.close()
    finally:
        server.kill()
        server.wait(timeout=30)
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "checkpoints").is_dir()
    server, address = start_server(str(run_dir), "--learn")
    try:
        client = PolicyClient(address)
        deadline = time.monotonic() + 60
        while client.metrics()["learner"]["episodes"] < episodes and time.monotonic() < deadline:
            time.sleep(0.2)
        learner = client.metrics()["learner"]
        assert learner["episodes"] == episodes and learner["error"] is None
        assert learner["steps_learned"] + learner["steps_waiting"] == acknowledged
        assert learner["steps_learned"] >= 3 * 256  # 8 lanes x 32 steps per update
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)


@pytest.mark.slow
def test_a_diverging_learner_stops_the_server_with_exit_1_keeping_the_last_good_checkpoint(
        tmp_path):
    from jaxrl_sys.client import PolicyClient, ServerError

    server, address = start_server("--learn", "--agent", "dqn", "--env", "gymnasium:CartPole-v1",
                                   "--run-root", str(tmp_path), "--checkpoint-every", "1",
                                   "--set", "learning_rate=1e30", "--set", "learning_starts=256")
    rng = np.random.default_rng(0)
    try:
        client = PolicyClient(address)
        deadline = time.monotonic() + 120
        while server.poll() is None and time.monotonic() < deadline:
            episode = client.start_episode()
            for _ in range(20):
                client.get_action(episode, rng.normal(0, 0.1, 4))
            client.end_episode(episode, rng.normal(0, 0.1, 4))
    except (httpx.HTTPError, ServerError):
        pass  # the server went away under the client
    output = server.communicate(timeout=60)[0]
    assert server.returncode == 1, output
    last = output.strip().splitlines()[-1]
    assert last.startswith("error: the learner's state went non-finite in update "), last
    (run_dir,) = tmp_path.iterdir()
    assert last.endswith(f"continue with jaxrl-serve {run_dir} --learn"), last
    failed = int(last.split("in update ")[1].split(";")[0])
    saved = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert saved and saved[-1] == failed - 1  # the last good update's, none after


def test_a_remote_client_imports_neither_jax_nor_the_agents():
    code = ("import sys; from jaxrl_sys.client import PolicyClient; "
            "print(sorted(m for m in ('jax', 'jaxrl_sys.agents', 'flax') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=Path(__file__).parent)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr


@pytest.mark.parametrize("args, words", [
    (["--host", "0.0.0.0"], "give a token"),
    (["--max-batch", "0"], "--max-batch must be >= 1"),
    (["--token", "short"], "at least 8 characters"),
    (["--seed-index", "3"], "the run has 1 seed(s)"),
])
def test_bad_flags_are_one_line_and_exit_2(ppo_run, args, words, capsys):
    from jaxrl_sys.commands.serve import main

    assert main([str(ppo_run), *args]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


@pytest.mark.parametrize("args, words", [
    (["--agent", "ppo"], "--learn starts a run from --agent and --env"),
    (["--agent", "ppo", "--env", "CartPole-v1"], "gymnasium:CartPole-v1, for its spaces"),
    (["--agent", "ppo", "--env", "gymnasium:CartPole-v1", "--set", "memory=gru"],
     "feed-forward policies only"),
    (["--agent", "ppo", "--env", "gymnasium:CartPole-v1", "--checkpoint-every", "0"],
     "--checkpoint-every must be >= 1"),
])
def test_a_learning_server_refuses_bad_flags_before_making_its_run(tmp_path, args, words,
                                                                   capsys):
    from jaxrl_sys.commands.serve import main

    assert main(["--learn", "--run-root", str(tmp_path / "runs"), *args]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_missing_run_is_one_line_and_exit_2(tmp_path, capsys):
    from jaxrl_sys.commands.serve import main

    assert main([str(tmp_path / "nothing")]) == 2
    assert "no run directory" in capsys.readouterr().err


def test_a_server_process_that_does_not_serve_raises_with_its_one_line(tmp_path):
    from jaxrl_sys.serve.process import ServerDidNotStart

    with pytest.raises(ServerDidNotStart, match="no run directory") as refused:
        start_server_process([str(tmp_path / "nothing")])
    assert str(refused.value).count("\n") == 0


def test_the_rllib_side_by_side_without_rllib_is_one_line_and_exit_2():
    """benchmarks/bench_rllib_serve.py needs a Python with Ray 2.9's RLlib and torch, which this
    package's environment lacks (Ray 2.60 has no `PolicyServerInput`): one line, exit 2."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_rllib_serve.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert "Ray 2.9 with RLlib and torch" in result.stderr


def test_a_two_player_policy_is_refused():
    resolved = resolve(RunSpec(agent="muzero", env="TicTacToe-v0"), agents.load, envs)
    _, agent = resolved.build(envs)
    with pytest.raises(ServeError, match="two-player game"):
        build_program(resolved, agent, max_batch=1)
