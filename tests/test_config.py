"""Tests for `--set key=value` parsing into frozen dataclass configs."""

from __future__ import annotations

import dataclasses
import json
from typing import Literal, Optional

import pytest

from jaxrl_sys.core.config import ConfigError, apply_overrides, config_to_dict, split_env_overrides


@dataclasses.dataclass(frozen=True)
class Config:
    """A config exercising every supported field type (string annotations via __future__)."""

    total_steps: int = 100_000
    learning_rate: float = 3e-4
    anneal_lr: bool = True
    env_name: str = "CartPole-v1"
    max_grad_norm: Optional[float] = 0.5
    target_period: int | None = None
    hidden_sizes: tuple[int, ...] = (64, 64)
    action_scale: tuple[float, ...] = (1.0,)
    policy: Literal["gumbel_muzero", "muzero"] = "gumbel_muzero"
    num_envs: int = 8
    num_minibatches: int = 4

    def validate(self) -> None:
        """Reject impossible combinations, as agents do."""
        if self.num_envs % self.num_minibatches:
            raise ValueError("num_envs must be divisible by num_minibatches")
        if self.learning_rate < 0:
            raise ConfigError("learning_rate must be >= 0")


@dataclasses.dataclass(frozen=True)
class Plain:
    """A config without validate()."""

    gamma: float = 0.99


def one(pair: str) -> Config:
    """Apply a single pair to the default Config."""
    return apply_overrides(Config(), [pair])


@pytest.mark.parametrize(
    "pair, field, expected",
    [
        ("total_steps=5", "total_steps", 5),
        ("total_steps=-3", "total_steps", -3),
        ("total_steps=1_000", "total_steps", 1000),
        ("total_steps=1e6", "total_steps", 1_000_000),
        ("total_steps=2.0", "total_steps", 2),
        ("learning_rate=3e-4", "learning_rate", 3e-4),
        ("learning_rate=1", "learning_rate", 1.0),
        ("learning_rate=0.01", "learning_rate", 0.01),
        ("anneal_lr=false", "anneal_lr", False),
        ("anneal_lr=TRUE", "anneal_lr", True),
        ("anneal_lr=0", "anneal_lr", False),
        ("anneal_lr=1", "anneal_lr", True),
        ("anneal_lr=Yes", "anneal_lr", True),
        ("anneal_lr=no", "anneal_lr", False),
        ("env_name=Acrobot-v1", "env_name", "Acrobot-v1"),
        ("env_name=a=b", "env_name", "a=b"),
        ("max_grad_norm=none", "max_grad_norm", None),
        ("max_grad_norm=None", "max_grad_norm", None),
        ("max_grad_norm=10", "max_grad_norm", 10.0),
        ("target_period=none", "target_period", None),
        ("target_period=500", "target_period", 500),
        ("hidden_sizes=256,256,128", "hidden_sizes", (256, 256, 128)),
        ("hidden_sizes=32", "hidden_sizes", (32,)),
        ("hidden_sizes= 16 , 8 ", "hidden_sizes", (16, 8)),
        ("hidden_sizes=", "hidden_sizes", ()),
        ("action_scale=0.5,2", "action_scale", (0.5, 2.0)),
        ("policy=muzero", "policy", "muzero"),
        (" learning_rate = 0.1 ", "learning_rate", 0.1),
    ],
)
def test_parses_each_type(pair: str, field: str, expected: object) -> None:
    value = getattr(one(pair), field)
    assert value == expected
    assert type(value) is type(expected)


def test_returns_new_frozen_instance_with_other_fields_unchanged() -> None:
    base = Config()
    new = apply_overrides(base, ["learning_rate=0.1", "hidden_sizes=8,8"])
    assert new is not base
    assert base.learning_rate == 3e-4 and base.hidden_sizes == (64, 64)
    assert new == dataclasses.replace(base, learning_rate=0.1, hidden_sizes=(8, 8))
    with pytest.raises(dataclasses.FrozenInstanceError):
        new.learning_rate = 1.0  # type: ignore[misc]


def test_later_pair_wins_and_empty_pairs_return_equal_copy() -> None:
    assert apply_overrides(Config(), ["num_envs=4", "num_envs=16"]).num_envs == 16
    copy = apply_overrides(Config(), [])
    assert copy == Config()


def test_config_without_validate() -> None:
    assert apply_overrides(Plain(), ["gamma=0.9"]).gamma == 0.9


@pytest.mark.parametrize(
    "pair, expected_words",
    [
        ("learning_rate=abc", ["--set learning_rate=abc", "expected a float"]),
        ("learning_rate=nan", ["learning_rate", "finite float"]),
        ("learning_rate=inf", ["learning_rate", "finite float"]),
        ("total_steps=1.5", ["total_steps=1.5", "expected an int"]),
        ("total_steps=abc", ["total_steps", "expected an int"]),
        ("total_steps=1e-3", ["total_steps", "expected an int"]),
        ("anneal_lr=maybe", ["anneal_lr", "expected a bool"]),
        ("max_grad_norm=big", ["max_grad_norm", "a float or none"]),
        ("target_period=1.5", ["target_period", "an int or none"]),
        ("hidden_sizes=64,x", ["hidden_sizes", "comma-separated ints"]),
        ("hidden_sizes=64,,64", ["hidden_sizes", "comma-separated ints"]),
        ("action_scale=a", ["action_scale", "comma-separated floats"]),
        ("policy=alphazero", ["policy", "one of 'gumbel_muzero', 'muzero'"]),
    ],
)
def test_wrong_type_is_one_line_error_naming_key(pair: str, expected_words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        one(pair)
    message = str(info.value)
    assert "\n" not in message
    for words in expected_words:
        assert words in message


def test_missing_equals() -> None:
    expected = r"^--set learning_rate: expected key=value \(missing '='\)$"
    with pytest.raises(ConfigError, match=expected):
        one("learning_rate")
    with pytest.raises(ConfigError, match="empty key"):
        one("=3")


def test_unknown_key_suggests_closest() -> None:
    with pytest.raises(ConfigError) as info:
        one("learning_rat=0.1")
    message = str(info.value)
    assert "\n" not in message
    assert "unknown key 'learning_rat'" in message
    assert "did you mean: learning_rate" in message


def test_unknown_key_without_close_match_lists_all_keys() -> None:
    with pytest.raises(ConfigError) as info:
        one("zzz=1")
    message = str(info.value)
    assert "unknown key 'zzz'" in message
    assert "valid keys:" in message
    for field in dataclasses.fields(Config):
        assert field.name in message


def test_validate_value_error_is_wrapped_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        one("num_minibatches=3")
    message = str(info.value)
    assert "num_envs must be divisible by num_minibatches" in message
    assert "\n" not in message
    assert isinstance(info.value.__cause__, ValueError)


def test_validate_config_error_propagates_unchanged() -> None:
    with pytest.raises(ConfigError, match="^learning_rate must be >= 0$"):
        one("learning_rate=-1")


def test_validate_is_called_on_result() -> None:
    calls: list[object] = []

    @dataclasses.dataclass(frozen=True)
    class Spy:
        x: int = 1

        def validate(self) -> None:
            calls.append(self)

    result = apply_overrides(Spy(), ["x=2"])
    assert calls == [result] and result.x == 2


def test_multiline_validate_message_is_joined() -> None:
    @dataclasses.dataclass(frozen=True)
    class Bad:
        x: int = 1

        def validate(self) -> None:
            raise ValueError("first line\nsecond line")

    with pytest.raises(ConfigError) as info:
        apply_overrides(Bad(), ["x=2"])
    assert "\n" not in str(info.value)
    assert "first line second line" in str(info.value)


def test_config_error_is_value_error() -> None:
    assert issubclass(ConfigError, ValueError)
    assert "\n" not in str(ConfigError("a\nb"))


def test_not_a_dataclass_instance_is_type_error() -> None:
    with pytest.raises(TypeError):
        apply_overrides(Config, ["num_envs=1"])  # the class, not an instance


def test_split_env_overrides() -> None:
    pairs = [
        "learning_rate=0.1",
        "env.max_steps=200",
        "env.gravity=9.8",
        "env.sparse=true",
        "env.mode=hard",
        "env.flag=No",
        "hidden_sizes=8,8",
    ]
    rest, env_kwargs = split_env_overrides(pairs)
    assert rest == ["learning_rate=0.1", "hidden_sizes=8,8"]
    assert env_kwargs == {
        "max_steps": 200, "gravity": 9.8, "sparse": True, "mode": "hard", "flag": False
    }
    assert type(env_kwargs["max_steps"]) is int and type(env_kwargs["gravity"]) is float


def test_split_env_overrides_leaves_bad_non_env_pairs_for_apply() -> None:
    rest, env_kwargs = split_env_overrides(["oops", "environment=1"])
    assert rest == ["oops", "environment=1"] and env_kwargs == {}


@pytest.mark.parametrize("pair", ["env.max_steps", "env.=3", "env.1x=3"])
def test_split_env_overrides_errors(pair: str) -> None:
    with pytest.raises(ConfigError) as info:
        split_env_overrides([pair])
    assert pair in str(info.value)


def test_config_to_dict_is_json_serialisable_with_lists() -> None:
    data = config_to_dict(apply_overrides(Config(), ["target_period=7"]))
    assert data["hidden_sizes"] == [64, 64]
    assert data["target_period"] == 7 and data["max_grad_norm"] == 0.5
    assert json.loads(json.dumps(data)) == data
    assert set(data) == {f.name for f in dataclasses.fields(Config)}


def test_fields_renamed_for_consistency_still_accept_their_old_names():
    """Older runs saved `num_steps` (PPO, SAC) and `discount` (MuZero) overrides."""
    from jaxrl_sys.agents import muzero, ppo

    assert apply_overrides(ppo.default_config("CartPole-v1"), ["num_steps=64"]).rollout_steps == 64
    assert apply_overrides(muzero.default_config("CartPole-v1"), ["discount=0.9"]).gamma == 0.9


@pytest.mark.parametrize("agent", ["ppo", "sac"])
def test_brax_defaults_are_valid_for_every_task(agent):
    """Family defaults ('brax:*') apply to every Brax task and pass validation."""
    from jaxrl_sys import agents

    module = agents.load(agent)
    for task in ("ant", "hopper", "inverted_pendulum", "humanoid", "walker2d"):
        config = module.default_config(f"brax:{task}")
        config.validate()
        assert config.normalize_obs and config.num_envs >= 128


def test_tuned_entries_pick_the_env_then_its_longest_family():
    from jaxrl_sys.agents import ppo
    from jaxrl_sys.core.config import Tuned, tuned_config

    entries = [Tuned("brax:*", {"num_envs": 7}, "a note"), Tuned("brax:hop*", {"num_envs": 5}),
               Tuned("CartPole-v1", {"num_envs": 3})]
    assert tuned_config(ppo.Config(), entries, "brax:hopper").num_envs == 5
    assert tuned_config(ppo.Config(), entries, "brax:ant").num_envs == 7
    assert tuned_config(ppo.Config(), entries, "CartPole-v1").num_envs == 3
    assert tuned_config(ppo.Config(), entries, "Acrobot-v1") == ppo.Config()
    with pytest.raises(ValueError, match="two tuned entries"):
        tuned_config(ppo.Config(), entries + [Tuned("CartPole-v1", {})], "CartPole-v1")
