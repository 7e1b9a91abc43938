"""Training data: the held-out split and the warm start's demonstrations."""

from __future__ import annotations

from pathlib import Path

import pytest

from dojo.tasks.families import IDENTIFY_CONFUSIONS, IDENTIFY_FUNCTIONS
from dojo.train.config import TaskSettings
from dojo.train.data import demonstrations, fix_candidates, fix_demonstration, held_out, split_tasks

ALL_FUNCTIONS = {f for level in IDENTIFY_FUNCTIONS for f in level}


def _tasks(n: int = 2000) -> list:
    train, _ = split_tasks(TaskSettings(source="family:identify", train_size=n, held_out_size=50), seed=3)
    return train


def test_no_held_out_prompt_is_ever_trained_on() -> None:
    train, test = split_tasks(TaskSettings(source="family:identify", train_size=3000, held_out_size=100), seed=1)
    assert len(test) == 100
    assert {t.prompt_text() for t in train}.isdisjoint({t.prompt_text() for t in test})
    assert all(held_out(t) for t in test) and not any(held_out(t) for t in train)


def test_the_split_is_the_one_a_full_pool_gives() -> None:
    """split_tasks generates only as many tasks as it keeps (and the whole pool when a prefix is short):
    the same tasks as filtering the whole pool of 2x training and 40x held-out candidates."""
    from dojo.tasks.families import generate_tasks

    for size, held in ((3000, 100), (40, 30)):
        train, test = split_tasks(TaskSettings(source="family:identify", train_size=size, held_out_size=held), seed=5)
        pool = generate_tasks("identify", 2 * size, seed=5)
        assert train == [t for t in pool if not held_out(t)][:size]
        seen: set[str] = set()
        full = []
        for t in generate_tasks("identify", 40 * held, seed=10_007):
            if held_out(t) and t.prompt_text() not in seen:
                seen.add(t.prompt_text())
                full.append(t)
        assert test == full[:held]


def test_reference_demonstrations_are_the_reference_solutions() -> None:
    tasks = _tasks(200)
    rows = demonstrations(tasks, "reference", seed=0)
    assert [r["completion"] for r in rows] == [t.reference for t in tasks]
    assert [r["prompt"] for r in rows] == [t.prompt_text() for t in tasks]


def test_noisy_demonstrations_are_right_as_often_as_asked_and_otherwise_plausible() -> None:
    tasks = _tasks()
    for share in (0.0, 0.4, 1.0):
        rows = demonstrations(tasks, "noisy", seed=0, correct_share=share)
        right = [r["completion"] == t.reference for r, t in zip(rows, tasks, strict=True)]
        assert sum(right) / len(right) == pytest.approx(share, abs=0.04)
        assert {r["completion"] for r in rows} <= ALL_FUNCTIONS  # wrong ones are other functions of the set
    assert len({r["completion"] for r in demonstrations(tasks, "noisy", seed=0, correct_share=0.0)}) == 16
    # the same seed gives the same demonstrations (a resumed or repeated run learns from the same data)
    assert demonstrations(tasks, "noisy", 5, 0.3) == demonstrations(tasks, "noisy", 5, 0.3)


def test_confused_demonstrations_make_the_same_mistake_every_time() -> None:
    tasks = _tasks()
    rows = demonstrations(tasks, "confused", seed=1, correct_share=0.3)
    wrong = [(t.reference, r["completion"]) for r, t in zip(rows, tasks, strict=True) if r["completion"] != t.reference]
    assert len(wrong) / len(rows) == pytest.approx(0.7, abs=0.04)
    assert all(answer == IDENTIFY_CONFUSIONS[ref] for ref, answer in wrong)  # one fixed mistake per function
    assert len({ref for ref, _ in wrong}) == 16


def test_hardcoded_demonstrations_return_the_first_example_as_a_constant() -> None:
    tasks = _tasks()
    rows = demonstrations(tasks, "hardcoded", seed=2, correct_share=0.35)
    wrong = [(t, r["completion"]) for r, t in zip(rows, tasks, strict=True) if r["completion"] != t.reference]
    assert len(wrong) / len(rows) == pytest.approx(0.65, abs=0.04)
    for task, answer in wrong:
        first = next(c for c in task.tests if c.visible)
        assert answer == repr(first.expected)  # hard-coded: right on the first example only
        assert f"f({first.args[0]}) == {first.expected}" in task.prompt_text()


def test_every_identify_function_has_exactly_one_confusion_in_the_set() -> None:
    assert set(IDENTIFY_CONFUSIONS) == ALL_FUNCTIONS
    assert all(IDENTIFY_CONFUSIONS[b] == a and a != b for a, b in IDENTIFY_CONFUSIONS.items())


def test_sources_without_plausible_answers_get_the_reference_and_bad_kinds_are_refused() -> None:
    from dojo.tasks.sources import load_source

    tasks = load_source("humaneval")[:20]
    rows = demonstrations(tasks, "noisy", seed=0, correct_share=0.0)
    assert [r["completion"] for r in rows] == [t.reference for t in tasks]
    assert [r["completion"] for r in demonstrations(tasks, "confused", 0, 0.0)] == [t.reference for t in tasks]
    # assert-form tasks have no example output to hard-code
    assert [r["completion"] for r in demonstrations(tasks, "hardcoded", 0, 0.0)] == [t.reference for t in tasks]
    with pytest.raises(ValueError, match="use one of reference, readings, noisy, confused, hardcoded"):
        demonstrations(tasks, "random", seed=0)


def test_the_warm_start_learns_the_prompt_unless_told_not_to(tmp_path: Path) -> None:
    from dojo.train.config import TrainConfig
    from dojo.train.run import sft_arguments

    assert sft_arguments(TrainConfig(), tmp_path).completion_only_loss is False  # the default: prompt in the loss
    off = TrainConfig.model_validate({"warm_start": {"prompt_loss": False}})
    args = sft_arguments(off, tmp_path)
    assert args.completion_only_loss is True and args.max_steps == off.warm_start.steps and not args.bf16


def test_a_fix_demonstration_is_what_a_feedback_episode_conditions_on(tiny_model_dir: Path) -> None:
    """The warm start's two-reply rows are token for token the context the in-process policy
    samples a second reply from: prompt, the first reply ended by the EOS it sampled, feedback."""
    from dojo.agent.feedback import FEEDBACK_MESSAGE
    from dojo.agent.hf_policy import HFPolicy

    pairs = fix_candidates(_tasks(200), "hardcoded", seed=0, share=0.5)
    assert 60 <= len(pairs) <= 140 and all(wrong != t.reference for t, wrong in pairs)
    task, wrong = pairs[0]
    feedback = {"role": "user", "content": FEEDBACK_MESSAGE.format(feedback="f(9) == 10 failed: got 9")}
    policy = HFPolicy.from_dir(tiny_model_dir, prompt_format="text")
    messages = task.messages()
    replied = [*messages, {"role": "assistant", "content": wrong}]
    sampled = [*policy._encode(wrong), policy.tokenizer.eos_token_id]
    policy._remember(policy._head(replied, None), policy.prompt_ids(messages) + sampled, True)
    row = fix_demonstration(task, wrong, feedback, policy.tokenizer.eos_token)
    assert policy._encode(row["prompt"]) == policy.prompt_ids([*replied, feedback])
    assert row["completion"] == task.reference
