"""dojo train's configuration: defaults, YAML, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dojo.train.config import ConfigError, TrainConfig, build_config, default_yaml, load_config


def test_printed_default_config_loads_back_to_the_default(tmp_path: Path) -> None:
    text = default_yaml()
    assert "# Optimizer steps of GRPO." in text  # every field carries its description
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert load_config(path) == TrainConfig()


def test_yaml_overrides_and_dotted_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"seed": 3, "grpo": {"steps": 7, "learning_rate": 1e-4}}))
    cfg = load_config(path, {"grpo.steps": 9, "output.dir": "x"})
    assert (cfg.seed, cfg.grpo.steps, cfg.grpo.learning_rate, str(cfg.output.dir)) == (3, 9, 1e-4, "x")
    assert cfg.grpo.group_size == TrainConfig().grpo.group_size
    strict = load_config(path, {"reward.call_rules": "strict"})
    assert strict.grading().call_rules == "strict" and TrainConfig().grading().call_rules == "task"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"grpo": {"stepz": 3}}, "grpo.stepz: Extra inputs are not permitted"),
        ({"grpo": {"group_size": 1}}, "grpo.group_size: Input should be greater than or equal to 2"),
        ({"tasks": {"difficulty": [0.8, 0.2]}}, "difficulty must be [low, high]"),
        ({"reward": {"mode": "vibes"}}, "reward.mode: Input should be"),
        ({"reward": {"call_rules": "loose"}}, "reward.call_rules: Input should be 'task', 'bfcl' or 'strict'"),
        ({"episode": {"mode": "chat"}}, "episode.mode: Input should be 'single', 'feedback' or 'tools'"),
        ({"episode": {"max_turns": 0}}, "episode.max_turns: Input should be greater than or equal to 1"),
        ({"policy": {"server": "localhost:8000"}}, "policy.server must be an http(s) URL"),
        ({"policy": {"server": ["http://a:8000/v1", "b:8000"]}}, "policy.server must be an http(s) URL"),
        ({"policy": {"server": []}}, "policy.server is an empty list"),
        ({"sandbox": {"ray": 6379}}, "sandbox.ray: Input should be a valid string"),
    ],
)
def test_bad_fields_are_named_with_the_reason(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config(data)
    assert message in str(err.value)


def test_missing_or_malformed_files_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"does not exist .*--print-config"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(listy)


def test_warm_start_and_grpo_train_on_disjoint_tasks_by_default() -> None:
    from dojo.tasks.families import generate_tasks
    from dojo.train.config import TrainConfig
    from dojo.train.run import split_for_warm_start

    tasks = generate_tasks("identify", 10, seed=0)
    sft, rl = split_for_warm_start(tasks, TrainConfig())
    assert len(sft) == len(rl) == 5 and not {t.id for t in sft} & {t.id for t in rl}
    both, same = split_for_warm_start(tasks, TrainConfig.model_validate({"warm_start": {"share": 1.0}}))
    assert both == same == tasks
    _, all_rl = split_for_warm_start(tasks, TrainConfig.model_validate({"warm_start": {"steps": 0}}))
    assert all_rl == tasks  # no warm start: GRPO gets every task
