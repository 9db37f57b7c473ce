"""The HTTP application (Starlette on uvicorn): routes, the token, the body limit.

    GET  /health                           {"status": "ok", agent, env, version}
    GET  /metrics                          requests by route and status, batches, latency
    GET  /v1/policy                        the run's record, the policy's manifest, spaces
    GET  /v1/params?version=V              the policy's leaves (204 when V is current)
    POST /v1/episodes                      {episode_id?} -> {episode_id, lane}
    POST /v1/episodes/{id}/act             {obs, reward?} -> {action}
    POST /v1/episodes/{id}/log_action      {obs, action, reward?}
    POST /v1/episodes/{id}/log_returns     {reward}
    POST /v1/episodes/{id}/log_steps       {obs [T, ...], actions [T, ...], rewards [T], extras}
    POST /v1/episodes/{id}/end             {obs?, terminated?, reward?} -> {return, length}

`reward` on act, log_action and end: the reward earned since the episode's last action, as `log_returns`
would report it (a remote client sends its rewards along, one request per step).

Bodies are JSON or msgpack (Content-Type); answers come in the request's format. Every
refusal is a 4xx with `{"error": one line}`, and the server goes on serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time
from typing import Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jaxrl_sys.serve import codec
from jaxrl_sys.serve.codec import RequestError
from jaxrl_sys.serve.service import PolicyService


def answer(payload: Any, kind: str, status: int = 200) -> Response:
    """A response body in `kind`."""
    return Response(codec.encode(payload, kind), status, media_type=kind)


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused (413) past `limit` bytes before it is all read."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise RequestError(413, f"body over the limit of {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestError(413, f"body over the limit of {limit} bytes")
    return bytes(body)


def build_app(service: PolicyService) -> Starlette:
    """The application serving `service`; its lifespan runs the batcher and drops idle
    episodes."""
    settings = service.settings
    served = service.served
    expected = f"Bearer {settings.token}".encode() if settings.token else None

    def endpoint(route: str, handler: Callable[[Request, dict, str], Awaitable[Any]]):
        """`handler(request, payload, kind)` behind the token, body and error checks."""

        async def respond(request: Request) -> Response:
            kind = codec.JSON
            try:
                if expected is not None:
                    given = request.headers.get("authorization", "").encode()
                    if not hmac.compare_digest(given, expected):
                        raise RequestError(401, "missing or wrong token (Authorization: Bearer ...)")
                kind = codec.media_type(request.headers.get("content-type"))
                payload = {}
                if request.method == "POST":
                    payload = codec.decode(await read_body(request, settings.max_body), kind)
                result = await handler(request, payload, kind)
                status, response = 200, answer(result, kind)
                if result is None:
                    status, response = 204, Response(status_code=204)
            except RequestError as error:
                status, response = error.status, answer({"error": error.message}, kind,
                                                        error.status)
            service.stats.request(route, status)
            return response

        return respond

    def obs_of(payload: dict, name: str = "obs"):
        return codec.array_field(payload, name, served.obs_shape, served.obs_dtype)

    async def health(request, payload, kind):
        return {"status": "ok", "agent": served.record.get("agent"),
                "env": served.record.get("env"), "version": service.version}

    async def metrics(request, payload, kind):
        snapshot = service.stats.snapshot()
        snapshot["episodes"] = {"open": len(service.episodes.open),
                                "started": service.episodes.started,
                                "ended": service.episodes.ended,
                                "expired": service.episodes.expired,
                                "steps_logged": service.episodes.steps_logged}
        snapshot["version"] = service.version
        if service.learner is not None:
            status, error = service.learner.status, service.learner.error
            snapshot["learner"] = {"updates": status.updates,
                                   "steps_learned": status.steps_learned,
                                   "steps_waiting": status.steps_waiting,
                                   "episodes": status.episodes, "done": status.done,
                                   "error": None if error is None else
                                   f"{type(error).__name__}: {error}"}
        return snapshot

    async def policy(request, payload, kind):
        return service.describe()

    async def params(request, payload, kind):
        known = request.query_params.get("version")
        if known is not None and known == str(service.version):
            return None
        return service.parameters(kind)

    async def start(request, payload, kind):
        episode = service.start(codec.text_field(payload, "episode_id", required=False))
        return {"episode_id": episode.episode_id, "lane": episode.lane}

    def earned(payload) -> float:
        """A reward earned since the last action, sent along with the next request (0 when
        none is); the service credits it once the request is accepted."""
        return codec.number_field(payload, "reward", default=0.0)

    async def act(request, payload, kind):
        started = time.perf_counter()
        action = await service.act(request.path_params["episode_id"], obs_of(payload),
                                   earned(payload))
        service.stats.act_done(time.perf_counter() - started)
        return {"action": codec.pack_array(action, kind)}

    async def log_action(request, payload, kind):
        action = codec.array_field(payload, "action", served.action_shape,
                                   "int32" if served.discrete else "float32")
        service.log_action(request.path_params["episode_id"], obs_of(payload), action,
                           earned(payload))
        return {}

    async def log_steps(request, payload, kind):
        rewards = codec.unpack_array(payload.get("rewards", []), "rewards")
        steps = rewards.shape[0] if rewards.ndim == 1 else -1
        if not 0 < steps <= 4096:
            raise RequestError(422, "rewards: expected 1 to 4096 rewards [T]")
        obs = codec.array_field(payload, "obs", (steps, *served.obs_shape), served.obs_dtype)
        actions = codec.array_field(payload, "actions", (steps, *served.action_shape),
                                    "int32" if served.discrete else "float32")
        rewards = codec.array_field(payload, "rewards", (steps,), "float32")
        given = payload.get("extras", {})
        if not isinstance(given, dict) or set(given) != set(service.program.extras):
            raise RequestError(422, f"extras: expected {sorted(service.program.extras)}")
        extras = {name: codec.array_field(given, name, (steps, *shape), dtype)
                  for name, (shape, dtype) in service.program.extras.items()}
        await service.log_steps(request.path_params["episode_id"], obs, actions, rewards, extras)
        return {}

    async def log_returns(request, payload, kind):
        episode = service.log_returns(request.path_params["episode_id"],
                                      codec.number_field(payload, "reward"))
        return {"return": episode.total_reward}

    async def end(request, payload, kind):
        final = obs_of(payload) if "obs" in payload else None
        terminated = payload.get("terminated", True)
        if not isinstance(terminated, bool):
            raise RequestError(422, "terminated: expected true or false")
        episode = service.end(request.path_params["episode_id"], final, terminated,
                              earned(payload))
        return {"return": episode.total_reward, "length": episode.length}

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        service.stats.request("unknown", status)
        return answer({"error": f"no route {request.method} {request.url.path}"}, codec.JSON,
                      status)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async def drop_idle():
            while True:
                await asyncio.sleep(min(settings.episode_timeout / 4, 5.0))
                service.episodes.expire()

        tasks = [asyncio.create_task(service.batcher.serve_forever()),
                 asyncio.create_task(drop_idle())]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            service.batcher.close()

    episode = "/v1/episodes/{episode_id}"
    routes = [
        Route("/health", endpoint("health", health)),
        Route("/metrics", endpoint("metrics", metrics)),
        Route("/v1/policy", endpoint("policy", policy)),
        Route("/v1/params", endpoint("params", params)),
        Route("/v1/episodes", endpoint("start", start), methods=["POST"]),
        Route(f"{episode}/act", endpoint("act", act), methods=["POST"]),
        Route(f"{episode}/log_action", endpoint("log_action", log_action), methods=["POST"]),
        Route(f"{episode}/log_returns", endpoint("log_returns", log_returns), methods=["POST"]),
        Route(f"{episode}/log_steps", endpoint("log_steps", log_steps), methods=["POST"]),
        Route(f"{episode}/end", endpoint("end", end), methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={404: not_found, 405: not_found})
