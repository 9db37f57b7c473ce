"""`PolicyClient`: an application's end of the policy server (RLlib's PolicyClient).

With `inference="remote"` every action is one request to the server. With `"local"` the
client rebuilds the server's compiled act from the run's record, acts with a cached copy of
the parameters (refreshed from the server every `update_interval` seconds), and sends its
steps to the server in batches, so that the server can learn from them.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

import httpx
import numpy as np

from jaxrl_sys.serve import codec

INFERENCE = ("remote", "local")
MAX_STEPS_PER_REQUEST = 4096  # the server's limit on one log_steps request


class ServerError(Exception):
    """The server refused a request: its status and one line."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclasses.dataclass
class LocalEpisode:
    """A local-inference episode: the memory it carries, the steps not yet sent and when the
    server last heard of it."""

    memory: Any
    contacted: float
    lane: int = 0
    starts: bool = True
    obs: list = dataclasses.field(default_factory=list)
    actions: list = dataclasses.field(default_factory=list)
    rewards: list = dataclasses.field(default_factory=list)
    extras: list = dataclasses.field(default_factory=list)


class PolicyClient:
    """Act through a policy server at `address` (e.g. "http://127.0.0.1:8000").

    Args:
        address: the server's base URL.
        inference: "remote" (ask the server) or "local" (a cached copy of the policy).
        update_interval: seconds between parameter refreshes with local inference.
        token: the server's token, if it has one.
        binary: msgpack bodies (raw array bytes) instead of JSON.
        timeout: seconds a request may take.
        catalog: a function giving (load_agent, registry) to rebuild the policy with for local
            inference (`jaxrl_sys.client.PolicyClient` passes this package's). A remote
            client imports neither JAX nor the agents.
        flush_steps: steps a local-inference episode sends to the server at once.
    """

    def __init__(self, address: str, *, inference: str = "remote", update_interval: float = 10.0,
                 token: Optional[str] = None, binary: bool = True, timeout: float = 30.0,
                 catalog: Optional[Callable[[], tuple[Callable[[str], Any], Any]]] = None,
                 flush_steps: int = 256, seed: int = 0):
        if inference not in INFERENCE:
            raise ValueError(f"inference must be one of {INFERENCE}, got {inference!r}")
        if not 1 <= flush_steps <= MAX_STEPS_PER_REQUEST:
            raise ValueError(f"flush_steps must be in 1..{MAX_STEPS_PER_REQUEST}, got {flush_steps}")
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.kind = codec.MSGPACK if binary else codec.JSON
        headers["content-type"] = self.kind
        self._http = httpx.Client(base_url=address.rstrip("/"), headers=headers, timeout=timeout)
        self.inference = inference
        self.update_interval = update_interval
        self.info = self._request("GET", "/v1/policy")
        # steps per log_steps request: within the server's body limit, with room for the
        # encoding (JSON spells a float32 in up to about 16 characters)
        step_bytes = 4 * (int(np.prod(self.info["obs_shape"])) + 1 +
                          int(np.prod(self.info["action_shape"] or [1])) +
                          sum(int(np.prod(shape or [1])) for shape, _ in
                              self.info["extras"].values()))
        room = self.info["max_body"] // (step_bytes * (2 if binary else 5))
        self.flush_steps = max(1, min(flush_steps, room))
        self._episodes: dict[str, LocalEpisode] = {}
        self._unsent: dict[str, float] = {}  # remote: rewards to send with the next request
        self._program = None
        if inference == "local":
            if catalog is None:
                raise ValueError("local inference needs the agents and envs to rebuild the "
                                 "policy: use jaxrl_sys.client.PolicyClient")
            # local inference only: JAX and the agents (a remote client needs neither)
            import jax

            from jaxrl_sys.serve.loading import rebuilt_program
            from jaxrl_sys.serve.program import Manifest

            self._jax = jax
            load_agent, registry = catalog()
            self._program = rebuilt_program(self.info["record"],
                                            Manifest.from_dict(self.info["manifest"]),
                                            load_agent, registry, max_batch=1,
                                            learning=self.info["learning"])
            self._leaves, self.version, self._refreshed = None, -1, 0.0
            self._server_steps = 0  # the server's step count at the last refresh
            self._key = jax.random.PRNGKey(seed)
            self._steps = 0
            self.update_policy_weights()
            self._program.warm_up(self._leaves)

    def _request(self, method: str, path: str, payload: Optional[dict] = None, **params) -> Any:
        """One request; the decoded answer (None for 204), or ServerError."""
        body = codec.encode(payload, self.kind) if payload is not None else None
        response = self._http.request(method, path, content=body, params=params or None)
        if response.status_code == 204:
            return None
        kind = codec.media_type(response.headers.get("content-type"))
        answer = codec.decode(response.content, kind)
        if response.status_code >= 400:
            raise ServerError(response.status_code, answer.get("error", response.text))
        return answer

    def _obs(self, observation: Any) -> np.ndarray:
        return np.asarray(observation, self.info["obs_dtype"])

    def _action_value(self, action: np.ndarray) -> Any:
        """An int for a discrete action, else the array."""
        return int(action) if self.info["discrete"] else np.asarray(action, np.float32)

    def start_episode(self, episode_id: Optional[str] = None) -> str:
        """Open an episode on the server; its id (a fresh one unless given)."""
        payload = {"episode_id": episode_id} if episode_id else {}
        answer = self._request("POST", "/v1/episodes", payload)
        episode_id = answer["episode_id"]
        if self._program is not None:
            self._episodes[episode_id] = LocalEpisode(self._program.row_memory, time.monotonic(),
                                                      answer["lane"])
        return episode_id

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The policy's action on `observation`."""
        obs = self._obs(observation)
        if self._program is None:
            payload = {"obs": codec.pack_array(obs, self.kind)}
            if episode_id in self._unsent:
                payload["reward"] = self._unsent[episode_id]
            answer = self._request("POST", f"/v1/episodes/{episode_id}/act", payload)
            self._unsent.pop(episode_id, None)  # credited (a refused request keeps it)
            return self._action_value(codec.unpack_array(answer["action"], "action"))
        episode = self._local(episode_id)
        if time.monotonic() - self._refreshed >= self.update_interval:
            self.update_policy_weights()
        key = self._jax.random.fold_in(self._key, self._steps)
        actions, extras, memory = self._program.act(
            self._leaves, obs[None], np.asarray([episode.starts]), [episode.memory], key,
            self._server_steps + self._steps, np.asarray([episode.lane]))
        self._steps += 1
        episode.memory, episode.starts = memory[0], False
        self._record(episode_id, episode, obs, actions[0], extras[0])
        return self._action_value(actions[0])

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """An action the application chose itself on `observation` (off-policy experience)."""
        obs = self._obs(observation)
        action = np.asarray(action, np.int32 if self.info["discrete"] else np.float32)
        if self._program is None:
            payload = {"obs": codec.pack_array(obs, self.kind),
                       "action": codec.pack_array(action, self.kind)}
            if episode_id in self._unsent:
                payload["reward"] = self._unsent[episode_id]
            self._request("POST", f"/v1/episodes/{episode_id}/log_action", payload)
            self._unsent.pop(episode_id, None)
        elif self._program.extras:
            raise ServerError(422, "log_action: this learner needs what its own policy records; "
                                   "only an off-policy learner takes the application's actions")
        else:
            self._record(episode_id, self._local(episode_id), obs, action, {})

    def log_returns(self, episode_id: str, reward: float) -> None:
        """A reward earned since the episode's last action (sent with the next request)."""
        if self._program is None:
            self._unsent[episode_id] = self._unsent.get(episode_id, 0.0) + float(reward)
            return
        episode = self._local(episode_id)
        if episode.rewards:
            episode.rewards[-1] += float(reward)
        else:  # a reward before the first action: the server keeps it in the return
            self._request("POST", f"/v1/episodes/{episode_id}/log_returns",
                          {"reward": float(reward)})

    def end_episode(self, episode_id: str, observation: Any = None,
                    terminated: bool = True) -> dict:
        """Close the episode (`terminated` False: cut short, e.g. by a time limit); the
        server's {"return", "length"} of it."""
        if self._program is not None:
            self._flush(episode_id, self._local(episode_id), keep_last=False)
            del self._episodes[episode_id]
        payload: dict = {"terminated": bool(terminated)}
        if episode_id in self._unsent:
            payload["reward"] = self._unsent[episode_id]
        if observation is not None:
            payload["obs"] = codec.pack_array(self._obs(observation), self.kind)
        answer = self._request("POST", f"/v1/episodes/{episode_id}/end", payload)
        self._unsent.pop(episode_id, None)
        return answer

    def update_policy_weights(self) -> bool:
        """Fetch the server's parameters if they changed (local inference); whether they did."""
        self._refreshed = time.monotonic()
        answer = self._request("GET", "/v1/params", version=str(self.version))
        if answer is None:
            return False
        self._leaves = [self._jax.device_put(codec.unpack_array(x, "leaf"))
                        for x in answer["leaves"]]
        self.version = int(answer["version"])
        self._server_steps, self._steps = int(answer["env_steps"]), 0
        return True

    def _local(self, episode_id: str) -> LocalEpisode:
        episode = self._episodes.get(episode_id)
        if episode is None:
            raise ServerError(404, f"no open episode {episode_id!r} in this client")
        return episode

    def _record(self, episode_id: str, episode: LocalEpisode, obs: np.ndarray,
                action: np.ndarray, extras: dict) -> None:
        """One local step. The steps go to the server (all but the newest, whose reward may
        still grow) once `flush_steps` wait, or a third of the server's episode timeout after
        it last heard of the episode, so that it keeps the episode open."""
        episode.obs.append(obs)
        episode.actions.append(np.asarray(action))
        episode.rewards.append(0.0)
        episode.extras.append(extras)
        quiet = time.monotonic() - episode.contacted > self.info["episode_timeout"] / 3
        if len(episode.obs) > self.flush_steps or quiet:
            self._flush(episode_id, episode, keep_last=True)

    def _flush(self, episode_id: str, episode: LocalEpisode, keep_last: bool) -> None:
        """Send the buffered steps to the server."""
        count = len(episode.obs) - (1 if keep_last else 0)
        if count <= 0:
            return
        self._request("POST", f"/v1/episodes/{episode_id}/log_steps", {
            "obs": codec.pack_array(np.stack(episode.obs[:count]), self.kind),
            "actions": codec.pack_array(np.stack(episode.actions[:count]), self.kind),
            "rewards": codec.pack_array(np.asarray(episode.rewards[:count], np.float32),
                                        self.kind),
            "extras": {name: codec.pack_array(np.stack([e[name] for e in episode.extras[:count]]),
                                              self.kind) for name in self._program.extras}})
        del episode.obs[:count], episode.actions[:count], episode.rewards[:count]
        del episode.extras[:count]
        episode.contacted = time.monotonic()

    def metrics(self) -> dict:
        """The server's metrics."""
        return self._request("GET", "/metrics")

    def close(self) -> None:
        """Close the connection."""
        self._http.close()

    def __enter__(self) -> "PolicyClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
