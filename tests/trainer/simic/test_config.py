"""TrainConfig: flags, validation with the flag named, the flat view for run_started."""

import argparse

import pytest

from trainer.simic.config import ConfigError, TrainConfig, add_training_args


def _parse(*argv: str) -> TrainConfig:
    parser = argparse.ArgumentParser()
    add_training_args(parser)
    return TrainConfig.from_args(parser.parse_args(list(argv)))


def test_defaults_and_flags():
    assert _parse() == TrainConfig()
    cfg = _parse("--policy", "heuristic", "--n-envs", "3", "--rounds", "2", "--episode-length", "5",
                 "--slots", "r0c2,r0c0", "--device", "cpu", "--seed", "7", "--amp-dtype", "bfloat16",
                 "--compile-mode", "default", "--gradient-telemetry-stride", "3", "--task", "synthetic")
    assert cfg.policy == "heuristic" and cfg.n_envs == 3 and cfg.slots == ("r0c2", "r0c0")
    assert cfg.ordered_slots == ("r0c0", "r0c2") and cfg.gradient_telemetry_stride == 3
    assert _parse("--slots", "3").slots == ("r0c0", "r0c1", "r0c2")


@pytest.mark.parametrize(("argv", "flag"), [
    (["--n-envs", "0"], "--n-envs"),
    (["--rounds", "-1"], "--rounds"),
    (["--episode-length", "1"], "--episode-length"),
    (["--slots", "r0c7"], "--slots"),
    (["--slots", "banana"], "--slots"),
    (["--slots", "r0c0,r0c0"], "--slots"),
    (["--device", "tpu"], "--device"),
    (["--gradient-telemetry-stride", "0"], "--gradient-telemetry-stride"),
    (["--task", "cifar10"], "--data-dir"),
    (["--task", "cifar10", "--data-dir", "/nonexistent/cifar"], "--data-dir"),
    (["--ppo-lr", "0"], "--ppo-lr"),
])
def test_bad_values_name_the_flag(argv, flag):
    with pytest.raises(ConfigError, match=f"^{flag}"):
        _parse(*argv)


def test_choices_are_enforced_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        _parse("--amp-dtype", "int8")
    assert "--amp-dtype" in capsys.readouterr().err


def test_flat_dict_is_scalars_only():
    flat = TrainConfig(slots=("r0c0", "r0c1"), extra={"note": "x"}).as_flat_dict()
    assert flat["slots"] == "r0c0,r0c1" and flat["note"] == "x" and flat["data_dir"] is None
    assert all(isinstance(v, (str, int, float, bool)) or v is None for v in flat.values())


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        TrainConfig().n_envs = 4  # type: ignore[misc]


def test_epochs_is_another_spelling_of_episode_length():
    assert _parse("--epochs", "4").episode_length == 4
    assert _parse("--epochs", "4") == _parse("--episode-length", "4")


def test_env_exec_is_batched_by_default_and_per_env_on_request():
    assert TrainConfig().env_exec == "batched" and _parse().env_exec == "batched"
    assert _parse("--env-exec", "per-env").env_exec == "per-env"
    with pytest.raises(ConfigError, match="--env-exec"):
        TrainConfig(env_exec="vmap")  # type: ignore[arg-type]
    assert _parse("--cuda-graphs", "off").cuda_graphs == "off"
