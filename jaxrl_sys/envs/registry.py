"""Name -> environment resolution: gymnax envs, our own pure-JAX envs, a user's own env named
`module:attr` (`jaxrl_sys.envs.custom`), and wrapper assembly."""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import functools
import importlib
import importlib.util
from typing import Any, Callable, Optional, Union

from jaxrl_sys.envs import custom, gymnax_env, params as env_params
from jaxrl_sys.envs.errors import EnvParamError, UnknownEnvError
from jaxrl_sys.envs.wrappers import EpisodeStatistics
from jaxrl_sys.core.types import Env

EnvFactory = Callable[..., Env]

GYMNASIUM_PREFIX = "gymnasium:"
ENVPOOL_PREFIX = "envpool:"
HOST_PREFIXES = (GYMNASIUM_PREFIX, ENVPOOL_PREFIX)
ATARI_NAMESPACE = "ALE/"  # gymnasium:ALE/<Game>-v5: ale-py's games, preprocessed (envs.atari)
PGX_PREFIX = "pgx:"
BRAX_PREFIX = "brax:"
JAXMARL_PREFIX = "jaxmarl:"

# gymnax ids that construct without network access (MNISTBandit-bsuite downloads data).
# Kept as literals so `names()` and error messages never pay for importing gymnax.
GYMNAX_NAMES: tuple[str, ...] = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "Pendulum-v1",
    "MountainCarContinuous-v0",
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
    "Catch-bsuite",
    "DeepSea-bsuite",
    "MemoryChain-bsuite",
    "UmbrellaChain-bsuite",
    "DiscountingChain-bsuite",
    "SimpleBandit-bsuite",
    "FourRooms-misc",
    "MetaMaze-misc",
    "PointRobot-misc",
    "BernoulliBandit-misc",
    "GaussianBandit-misc",
    "Reacher-misc",
    "Swimmer-misc",
    "Pong-misc",
    "FrozenLake-misc",
)

# POPGym memory tasks (jaxrl_sys/envs/popgym.py): `<Task><Level>-popgym`.
# Literals, as GYMNAX_NAMES, so that `names()` imports neither the module nor gymnax.
POPGYM_NAMES: tuple[str, ...] = tuple(
    f"{task}{level}-popgym"
    for task in ("RepeatFirst", "RepeatPrevious", "CountRecall", "StatelessCartPole")
    for level in ("Easy", "Medium", "Hard")
)



@dataclasses.dataclass(frozen=True)
class EnvFamily:
    """A family of envs that an agent's shipped defaults are written for: one `defaults.py`
    entry under `pattern` sizes a run for every env of the family (the classic control
    tasks have no pattern: an agent's `Config` defaults are sized for them), and `examples`
    are what a table of the defaults builds to see whether an agent takes the family."""

    name: str
    pattern: Optional[str]
    examples: tuple[str, ...]
    members: tuple[str, ...] = ()  # the family's envs where no pattern names them

    def contains(self, env_name: str) -> bool:
        """Whether `env_name` belongs to the family."""
        if self.pattern is None:
            return env_name in self.members
        return fnmatch.fnmatchcase(env_name, self.pattern)


FAMILIES: tuple[EnvFamily, ...] = (
    EnvFamily("gymnax classic control", None, ("CartPole-v1", "Pendulum-v1"),
              members=("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1",
                       "MountainCarContinuous-v0")),
    EnvFamily("MinAtar", "*-MinAtar", ("Breakout-MinAtar",)),
    EnvFamily("bsuite", "*-bsuite", ("Catch-bsuite",)),
    EnvFamily("POPGym", "*-popgym", ("RepeatPreviousEasy-popgym",)),
    EnvFamily("Brax", "brax:*", ("brax:hopper",)),
    EnvFamily("pgx board games", "pgx:*", ("pgx:connect_four",)),
    EnvFamily("JaxMARL", "jaxmarl:*", ("jaxmarl:MPE_simple_spread_v3",)),
)


# Returns at which an env counts as solved (Gymnasium's reward_threshold, where it has one;
# -200 for Pendulum, a common bar). Used to report when a run solved its env.
REWARD_THRESHOLDS: dict[str, float] = {
    "CartPole-v1": 475.0,
    "Acrobot-v1": -100.0,
    "MountainCar-v0": -110.0,
    "MountainCarContinuous-v0": 90.0,
    "Pendulum-v1": -200.0,
    # Greedy mean return 0 against the perfect opponent: never losing is the best possible.
    "TicTacToe-v0": 0.0,
}


def reward_threshold(name: str) -> float | None:
    """The return at which `name` counts as solved, or None if there is no agreed bar.

    For `gymnasium:<id>` names it is Gymnasium's own `reward_threshold` for the id.
    """
    if is_host_env(name):
        try:
            return make_host(name).reward_threshold
        except ValueError:
            return None
    return REWARD_THRESHOLDS.get(name)


# Our own envs: name -> factory, or a "module:attr" string imported on first use.
_OWN: dict[str, Union[EnvFactory, str]] = {}
# Params that turn an env into its evaluation variant (see `make_eval`); absent means none.
_EVAL_PARAMS: dict[str, dict[str, Any]] = {}
# Players of our own envs as a function of their params; absent means one.
_PLAYERS: dict[str, Callable[[dict[str, Any]], int]] = {}


def register(
    name: str,
    factory: Union[EnvFactory, str],
    eval_params: Optional[dict[str, Any]] = None,
    players: Union[int, Callable[[dict[str, Any]], int]] = 1,
) -> None:
    """Register our own env: `factory(**params) -> Env`, or a lazy "module:attr" path to one.

    `eval_params` override the params for the env's evaluation variant (see `make_eval`), e.g.
    a fixed strong opponent for a self-play board game. `players`: its `spec.num_players`, or a
    function of the params giving it, so that `num_players` answers without building the env.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("env name must be a non-empty string")
    if name.startswith(HOST_PREFIXES):
        raise ValueError(f"env names starting with {' or '.join(HOST_PREFIXES)} are reserved")
    if name in GYMNAX_NAMES or name in _OWN:
        raise ValueError(f"env {name!r} is already registered")
    if not (callable(factory) or (isinstance(factory, str) and ":" in factory)):
        raise TypeError("factory must be callable or a 'module:attr' string")
    _OWN[name] = factory
    if eval_params:
        _EVAL_PARAMS[name] = dict(eval_params)
    else:
        _EVAL_PARAMS.pop(name, None)
    _PLAYERS[name] = players if callable(players) else (lambda params, n=int(players): n)


def names() -> list[str]:
    """All names `make` resolves (gymnax ids, then our own envs)."""
    return [*GYMNAX_NAMES, *_OWN]


def make(name: str, *, episode_stats: bool = True, **params: Any) -> Env:
    """Build env `name` with `params` overriding its defaults, wrapped in EpisodeStatistics
    (if `episode_stats`). Observation normalisation is the agents' (`jaxrl_sys.core.obs_norm`).

    `name` is a gymnax id, one of our own envs, `pgx:<game>`, `brax:<task>`, a multi-agent
    `jaxmarl:<env>` or `jaxmarl:SMAX:<map>` (agents on axis 0), or a user's env
    as `module:attr` (imported on use, see `jaxrl_sys.envs.custom`). Bad names, params and
    values are one-line errors (`USER_ERRORS`)."""
    if is_host_env(name):
        raise UnknownEnvError(
            f"{name!r} is not a JAX env: it runs in worker processes through the host loop "
            "(envs.make_host)"
        )
    if name.startswith(PGX_PREFIX):
        if params:
            raise EnvParamError(f"{name} takes no env params, got {', '.join(sorted(params))}")
        from jaxrl_sys.envs import pgx_env  # lazy: importing pgx is not free

        env = pgx_env.make(name)
    elif name.startswith(JAXMARL_PREFIX):
        if importlib.util.find_spec("jaxmarl") is None:
            raise UnknownEnvError(f"{name} needs jaxmarl: pip install -e '.[jaxmarl]'")
        from jaxrl_sys.envs import jaxmarl_env  # lazy: importing jaxmarl is not free

        env = jaxmarl_env.make(name, **params)
    elif name.startswith(BRAX_PREFIX):
        if importlib.util.find_spec("brax") is None:
            raise UnknownEnvError(f"{name} needs brax: pip install -e '.[brax]'")
        from jaxrl_sys.envs import brax_env  # lazy: importing brax is not free

        env = brax_env.make(name, **params)
    elif name in _OWN:
        env = _make_own(name, params)
    elif name in GYMNAX_NAMES:
        env = _make_gymnax(name, params)
    elif custom.is_import_path(name):  # a user's own env: "my_pkg.envs:MyEnv"
        env = custom.make(name, params)
    else:
        raise UnknownEnvError(_unknown_message(name))
    if episode_stats:
        env = EpisodeStatistics(env)
    return env


def num_players(name: str, **params: Any) -> int:
    """`spec.num_players` of env `name` with `params`, known without building it (so no device
    is touched): 2 for pgx games and our own two-player envs in self-play, else 1."""
    if name.startswith(PGX_PREFIX):
        return 2
    if name in _PLAYERS:
        return _PLAYERS[name](params)
    return 1


def is_multi_agent(name: str) -> bool:
    """Whether env `name` is a team of agents on axis 0 (`jaxmarl:`), known without building it."""
    return name.startswith(JAXMARL_PREFIX)


def is_host_env(name: str) -> bool:
    """Whether `name` is an env run by the host loop (`gymnasium:<id>`, `envpool:<task>`),
    not on device."""
    return name.startswith(HOST_PREFIXES)


def make_host(name: str, **params: Any):
    """Resolve a `gymnasium:<id>` name (a `GymnasiumEnv`, params to `gymnasium.make`) or an
    `envpool:<task>` name (an `EnvpoolEnv`, params to `envpool.make`) for the host loop.

    One line errors: unknown id, bad params and unsupported spaces (`UnsupportedEnvError`).
    """
    if not is_host_env(name):
        raise UnknownEnvError(f"{name!r} is not a host-loop env (names start with "
                              f"{' or '.join(repr(p) for p in HOST_PREFIXES)})")
    prefix = next(p for p in HOST_PREFIXES if name.startswith(p))
    env_id = name[len(prefix):]
    if not env_id:
        raise UnknownEnvError(f"{name!r} names no env id")
    if prefix == ENVPOOL_PREFIX:
        from jaxrl_sys.envs import envpool_env  # lazy, as below

        return envpool_env.make(env_id, **params)
    if env_id.startswith(ATARI_NAMESPACE):
        from jaxrl_sys.envs import atari

        return atari.make_gymnasium(env_id, **params)
    from jaxrl_sys.envs import gymnasium_env  # lazy: importing gymnasium is not free

    return gymnasium_env.make(env_id, **params)


def make_eval(name: str, against: Optional[str] = None, **params: Any) -> Env:
    """Build the evaluation variant of env `name`.

    A two-player self-play game is evaluated against an opponent in both seats (see
    `envs.opponents`): `opponent` (`random`, `perfect` or `mcts:N`), else the env's own
    evaluation variant where one is registered (tic-tac-toe against its perfect player), else
    a random player. Every other env: `make` with its registered eval params on top.
    """
    from jaxrl_sys.envs import opponents

    if against is None:
        if name.startswith(f"{JAXMARL_PREFIX}SMAX:"):  # greedy evaluation measures wins
            return make(name, **{**params, "reward": "win"})
        env = make(name, **{**params, **_EVAL_PARAMS.get(name, {})})
        if env.spec.num_players != 2:
            return env
        return opponents.against(name, env, opponents.DEFAULT_OPPONENT)
    opponents.check_opponent(name, against, num_players(name, **params))
    return opponents.against(name, make(name, **params), against)


def check_opponent(name: str, opponent: str, **params: Any) -> None:
    """One-line EnvParamError unless `opponent` can evaluate env `name` with `params`; builds
    nothing (see `make_eval`)."""
    from jaxrl_sys.envs import opponents

    opponents.check_opponent(name, opponent, num_players(name, **params))


def _make_gymnax(name: str, params: dict[str, Any]) -> Env:
    """Construct gymnax env `name`: constructor arguments (`gymnax.make(name, **kwargs)`, e.g.
    DeepSea's `size`) to its constructor, the other params baked into its EnvParams."""
    import gymnax  # lazy: importing gymnax takes seconds

    default_env, _ = gymnax.make(name)
    return gymnax_env.build(name, type(default_env),
                            lambda **kwargs: gymnax.make(name, **kwargs)[0], params)


def _make_own(name: str, params: dict[str, Any]) -> Env:
    """Construct one of our own registered envs, checking `params` against its signature."""
    factory = _OWN[name]
    if isinstance(factory, str):
        module, attr = factory.split(":", 1)
        factory = getattr(importlib.import_module(module), attr)
        _OWN[name] = factory
    return env_params.call_checked(name, factory, params)


def _make_popgym(name: str, **params: Any) -> Env:
    """Build POPGym preset `name`; its module (and gymnax) is imported on the first build."""
    from jaxrl_sys.envs import popgym

    return popgym.make(name, **params)


def _unknown_message(name: str) -> str:
    """One line naming the closest known envs, or a few known ones if nothing is close."""
    known = names()
    by_lower = {n.lower(): n for n in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)
    if close:
        return f"unknown env {name!r}; closest: {', '.join(by_lower[c] for c in close)}"
    return f"unknown env {name!r}; known envs include: {', '.join(known[:6])}, ..."


# Our own envs, each imported on its first `make`.
register("TicTacToe-v0", "jaxrl_sys.envs.tictactoe:TicTacToe", eval_params={"opponent": "perfect"},
         players=lambda params: 2 if params.get("opponent", "self") == "self" else 1)
for _name in POPGYM_NAMES:  # constructor knobs and EnvParams fields are checked by popgym.make
    register(_name, functools.partial(_make_popgym, _name))
