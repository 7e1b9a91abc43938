from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from dojo.rewards import Grader
from dojo.sandbox import AsyncSandbox
from dojo.tasks import generate_tasks, load_humaneval, load_reasoning_gym, load_source
from dojo.tasks.humaneval import convert_check
from dojo.tasks.reasoning_gym import FAMILIES
from dojo.tasks.sources import UNVERIFIABLE, canonical_source, known_unverifiable
from dojo.tasks.values import decode_value
from tests.sandbox.conftest import requires_isolation


def test_humaneval_ships_164_tasks_offline() -> None:
    tasks = load_humaneval()
    assert len(tasks) == 164 and len({t.id for t in tasks}) == 164
    assert all(t.form == "assert" and t.reference and t.entry_point for t in tasks)


def test_plain_checks_convert_to_function_form() -> None:
    converted = convert_check(
        "def check(candidate):\n    assert candidate([1, 2], 3) == (1, 2)\n    assert not candidate([], 0)\n"
        "    assert abs(candidate([0.5], 1) - 0.25) < 1e-4\n    assert True\n"
    )
    assert converted is not None
    cases, tol = converted
    assert [decode_value(c.args) for c in cases] == [[[1, 2], 3], [[], 0], [[0.5], 1]]
    assert [decode_value(c.expected) for c in cases] == [(1, 2), False, 0.25]
    assert tol == 1e-4
    assert convert_check("def check(candidate):\n    for i in range(3):\n        assert candidate(i) == i\n") is None
    functions = load_humaneval("function")
    assert 100 < len(functions) < 164  # loops and helper-based checks stay in assert form only


async def test_humaneval_shows_its_prompts_examples_as_visible_tests(grader: Grader) -> None:
    """A check's asserts that the prompt shows as doctest examples are visible tests (the rest stay
    hidden), so `dojo rollout humaneval --mode feedback --max-turns 3` gives a reply that fails a shown
    example its failure back; every HumanEval task had been single-turn (no visible test)."""
    from dojo.agent.episode import EpisodeConfig, EpisodeRunner
    from tests.agent.scripted import fixed

    tasks = {t.id: t for t in load_humaneval()}
    assert sum(bool(t.visible_tests) for t in tasks.values()) == 40
    task = tasks["HumanEval/20"]  # find_closest_elements: 2 of its check's 5 asserts are its docstring's examples
    (shown,) = task.visible_tests
    assert shown.code is not None and shown.code.count("assert") == 2 and task.hidden_tests
    assert sum(t.code.count("assert candidate") for t in task.tests if t.code) == 5  # (the check's, once each)
    functions = {t.id: t for t in load_humaneval("function")}
    assert len(functions["HumanEval/20/function"].visible_tests) == 2
    wrong = "```python\ndef find_closest_elements(numbers):\n    return (numbers[0], numbers[1])\n```"
    right = "```python\n" + (task.reference or "") + "\n```"
    config = EpisodeConfig(mode="feedback", max_turns=3)
    episode = await EpisodeRunner(fixed(wrong, right), grader, config).run(task)
    assert (episode.status, len(episode.turns), episode.value) == ("answered", 2, 1.0), episode.error
    assert "visible tests" in episode.messages[2]["content"]
    # a right reply that prints one of the prompt's examples is graded (the examples had been counted
    # twice, as visible tests and as the prompt's: one literal of a shown input read as a hack)
    shows = (
        task.reference or ""
    ) + "\nif __name__ == '__main__':\n    print(find_closest_elements([1.0, 2.0, 3.0, 4.0, 5.0, 2.2]))\n"
    for graded in (task, functions["HumanEval/20/function"]):
        reward = await grader.grade(graded, "```python\n" + shows + "\n```")
        assert (reward.value, reward.verdict) == (1.0, "pass"), (graded.id, reward.error, reward.flags)


def test_reasoning_gym_levels_turn_the_generators_knobs() -> None:
    easy = load_reasoning_gym(["chain_sum"], n=30, level=1, seed=0)
    hard = load_reasoning_gym(["chain_sum"], n=30, level=5, seed=0)

    def terms(t: object) -> int:
        return len(t.metadata.model_extra["rg_entry"]["question"].split("=")[0].split())  # type: ignore[attr-defined]

    assert statistics.mean(map(terms, hard)) > statistics.mean(map(terms, easy))
    assert {t.metadata.difficulty for t in easy} == {0.0} and {t.metadata.difficulty for t in hard} == {1.0}
    assert {FAMILIES[f][0] for f in FAMILIES} == {"math", "algorithmic", "code_reasoning"}
    assert load_reasoning_gym(["gcd"], n=3, seed=7) == load_reasoning_gym(["gcd"], n=3, seed=7)


def test_generated_families_are_reproducible_and_graded_on_hidden_inputs() -> None:
    a = generate_tasks("expressions", 20, seed=3, difficulty=(0.0, 1.0))
    assert a == generate_tasks("expressions", 20, seed=3, difficulty=(0.0, 1.0))
    assert a != generate_tasks("expressions", 20, seed=4, difficulty=(0.0, 1.0))
    for t in a:
        shown = [c for c in t.tests if c.visible]
        assert len(shown) == 3 and len(t.hidden_tests) == 8
        for c in shown:
            assert f"f({c.args[0]}) == {c.expected}" in t.prompt_text()
    assert len({t.metadata.difficulty for t in a}) > 2


def test_identify_examples_pick_out_exactly_one_function_of_the_set() -> None:
    from dojo.tasks.families import IDENTIFY_FUNCTIONS, _value, family_candidates

    functions = [f for level in IDENTIFY_FUNCTIONS for f in level]
    tasks = generate_tasks("identify", 300, seed=5)
    assert tasks == generate_tasks("identify", 300, seed=5)
    assert {t.reference for t in tasks} == set(functions)  # every function turns up
    assert {t.metadata.difficulty for t in tasks} == {0.0, 0.333, 0.667, 1.0}
    for t in tasks:
        shown = [c for c in t.tests if c.visible]
        assert len(shown) == 3 and len(t.hidden_tests) == 8
        for c in shown:
            assert f"# f({c.args[0]}) == {c.expected}\n" in t.prompt_text()
        fitting = [f for f in functions if all(_value(f, c.args[0]) == c.expected for c in shown)]
        assert fitting == [t.reference], (t.prompt_text(), fitting)  # the examples leave no doubt
        candidates = family_candidates(t)
        assert candidates is not None and t.reference in candidates
    assert len({t.prompt_text() for t in tasks}) > 290  # prompts rarely repeat: no answer to memorise


def test_known_unverifiable_tasks_are_left_out_unless_asked_for() -> None:
    """Each listed task exists in its source (a new package version that renames one is noticed),
    says why, and is left out of the source unless ``all=1``; n and seed draw from what is left."""
    known = {source: known_unverifiable(source) for source in json.loads(UNVERIFIABLE.read_text())}
    assert set(known) >= {"tau2:airline", "tau2:retail", "intercode:bash", "intercode:sql", "bfcl:simple_java"}
    for source, listed in known.items():
        every = {t.id for t in load_source(f"{source}?all=1")}
        kept = {t.id for t in load_source(source)}
        assert set(listed) <= every, (source, set(listed) - every)
        assert kept == every - set(listed) and all(len(why) > 40 for why in listed.values()), source
    sample = load_source("tau2:airline?n=10&seed=3")
    assert len(sample) == 10 and not {t.id for t in sample} & set(known["tau2:airline"])
    assert [t.id for t in sample] == [t.id for t in load_source("tau2:airline?n=10&seed=3")]
    with pytest.raises(ValueError, match="all"):
        load_source("tau2:airline?everything=1")


def test_the_sql_tasks_left_out_are_exactly_those_whose_gold_returns_nothing() -> None:
    listed = set(known_unverifiable("intercode:sql"))
    empty = {t.id for t in load_source("intercode:sql?all=1") if not t.tests[0].expected.strip()}
    assert listed == empty


@requires_isolation
async def test_the_bash_tasks_left_out_pass_with_an_empty_script(fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(fast_sandbox)
    for task in load_source("intercode:bash?all=1"):
        passes = (await grader.grade(task, "```bash\ntrue\n```")).value == 1.0
        assert passes == (task.id in known_unverifiable("intercode:bash")), task.id


def test_one_source_spelled_two_ways_has_one_canonical_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    local = str(tmp_path.resolve() / "t.jsonl")
    assert canonical_source("t.jsonl") == canonical_source("./t.jsonl") == canonical_source(f" {local} ") == local
    assert canonical_source("sub/../t.jsonl") == local
    assert canonical_source("sub/t.jsonl") != local
    assert canonical_source("s3://bucket/t.jsonl") == "s3://bucket/t.jsonl"
    assert canonical_source("family:sql?seed=1&n=5") == canonical_source("family:sql?n=5&seed=1")
    assert canonical_source("family:sql?seed=1&n=5") == "family:sql?n=5&seed=1"
    assert canonical_source("family:sql?n=5&seed=1") != canonical_source("family:sql?n=5&seed=2")
    assert canonical_source("humaneval") == "humaneval"
