"""``DojoRollout``: dojo's episodes (single, feedback: code → visible tests → feedback → fix, tools)
as a TRL ``rollout_func``, run by the rollout scheduler with the trainer's model (in process, or
served by ``dojo policy serve`` with its weights pushed each step), ``env_mask`` 0 on everything
the environment added."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from datasets import Dataset

from dojo.agent.episode import Episode, TurnRecord
from dojo.agent.policy import Completion, OpenAIPolicy
from dojo.agent.tokens import episode_tokens
from dojo.agent.weight_sync import ServedWeights
from dojo.errors import InputError
from dojo.integrations.event_loops import SANDBOXES
from dojo.integrations.trl import DojoRollout, episode_reward, task_rows
from dojo.integrations.trl_rollout import UNSCORABLE_PROMPT_TOKENS, GradeOnce
from dojo.rewards import Reward
from dojo.rollout.scheduler import Group
from tests.conftest import free_port
from tests.integrations.conftest import DeadSandbox, arith_tasks, grpo_args

TASKS = arith_tasks(["x + 1", "x * 2"])


def _train(
    model_dir: Path, out: Path, rollout: DojoRollout, *, chat: bool = True, steps: int = 1, tokens: int = 12
) -> tuple[Any, list[dict[str, Any]]]:
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    captured: list[dict[str, Any]] = []

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        result = rollout(prompts, trainer)
        captured.append(result)
        return result

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    args = grpo_args(out, max_completion_length=tokens, seed=0, max_steps=steps)
    trainer = GRPOTrainer(
        model=str(model_dir), reward_funcs=episode_reward, args=args, rollout_func=rollout_func,
        train_dataset=Dataset.from_list(task_rows(TASKS, chat=chat)), processing_class=tokenizer,
    )  # fmt: skip
    trainer.train()
    rollout.close()
    return trainer, captured


def test_feedback_turns_are_environment_tokens(tiny_model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    trainer, captured = _train(tiny_model_dir, tmp_path, DojoRollout(TASKS, max_turns=2, pool_size=1))
    (out,) = captured
    assert len(out["completion_ids"]) == 4  # one episode per prompt of the step
    for ids, mask, lps, turns in zip(
        out["completion_ids"], out["env_mask"], out["logprobs"], out["dojo_turns"], strict=True
    ):
        assert len(ids) == len(mask) == len(lps)
        env = [t for t, m in zip(ids, mask, strict=True) if m == 0]
        if turns == 2:  # the random model's first reply failed the visible tests: feedback, then a fix
            text = tokenizer.decode(env)
            assert "did not pass the visible tests" in text and text.endswith("<|im_start|>assistant\n")
            assert mask[0] == 1 and mask[-1] == 1
            assert all(lp == 0.0 for lp, m in zip(lps, mask, strict=True) if m == 0)
        else:
            assert not env
        assert all(lp <= 0.0 for lp in lps)
    assert any(t == 2 for t in out["dojo_turns"])
    rewards = [r for r in out["dojo_reward"] if r is not None]
    assert rewards and all(r in (0.0, 1.0) for r in rewards)
    log = next(entry for entry in trainer.state.log_history if "reward" in entry)
    assert log["reward"] == pytest.approx(sum(rewards) / len(rewards))
    # the trainer counted only the model's tokens as the completion length
    assert log["completions/mean_length"] == pytest.approx(sum(sum(m) for m in out["env_mask"]) / 4)


def test_single_turn_episodes_have_no_environment_tokens(tiny_model_dir: Path, tmp_path: Path) -> None:
    _, (out,) = _train(tiny_model_dir, tmp_path, DojoRollout(TASKS, max_turns=1, pool_size=1))
    assert all(turns == 1 for turns in out["dojo_turns"])
    assert all(set(mask) == {1} for mask in out["env_mask"])


def test_the_loss_sees_the_episode_records_tokens(tiny_model_dir: Path, tmp_path: Path) -> None:
    """One record from generation to loss: the rows TRL trains on are the episodes' own token ids,
    and the groups handed to ``on_groups`` (what ``dojo train`` stores) are those episodes."""
    seen: list[list[Group]] = []
    rollout = DojoRollout(TASKS, max_turns=2, pool_size=1, on_groups=seen.append)
    _, (out,) = _train(tiny_model_dir, tmp_path, rollout)
    (groups,) = seen
    episodes = [ep for group in groups for ep in group.episodes]
    assert [g.group_id.split("/")[0] for g in groups] == ["step000001"] * len(groups)
    for ep, ids, mask, reward in zip(episodes, out["completion_ids"], out["env_mask"], out["dojo_reward"], strict=True):
        tokens = episode_tokens(ep)
        assert tokens.completion_ids == ids and tokens.env_mask == mask
        sampled = [t for turn in ep.turns for t in turn.completion.token_ids or []]
        assert [t for t, m in zip(ids, mask, strict=True) if m] == sampled  # never re-tokenized
        assert reward == (ep.value if ep.scored else None)


def test_text_prompts_render_as_plain_text(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A model trained on plain prompts (dojo train's tiny model) gets the prompt text itself, and
    feedback as plain text between its replies."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    rollout = DojoRollout(TASKS, max_turns=2, pool_size=1, prompt_format="text")
    _, (out,) = _train(tiny_model_dir, tmp_path, rollout, chat=False)
    prompts = {tokenizer.decode(ids) for ids in out["prompt_ids"]}
    assert prompts == {t.prompt_text() for t in TASKS}
    for ids, mask, turns in zip(out["completion_ids"], out["env_mask"], out["dojo_turns"], strict=True):
        env = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
        assert (env.startswith("\n\nYour code did not pass") and env.endswith("\n\n")) if turns == 2 else env == ""


def test_tool_episodes_train_with_the_tool_results_masked(text_tools_model_dir: Path, tmp_path: Path) -> None:
    """``mode="tools"``: the model's ``<tool_call>`` text runs dojo's tools; what they return is
    environment tokens. The model taught to submit ``x + 1`` passes the first task and fails the other."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(text_tools_model_dir)
    seen: list[list[Group]] = []
    rollout = DojoRollout(TASKS, mode="tools", max_turns=2, pool_size=1, on_groups=seen.append)
    _, (out,) = _train(text_tools_model_dir, tmp_path, rollout, tokens=96)
    episodes = [ep for group in seen[0] for ep in group.episodes]
    assert all(ep.scored for ep in episodes) and out["dojo_reward"] == [ep.value for ep in episodes]
    for ep, ids, mask in zip(episodes, out["completion_ids"], out["env_mask"], strict=True):
        env = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
        tool_messages = [m for m in ep.messages if m["role"] == "tool"]
        if len(ep.turns) == 2:  # a tool ran between the replies: its result is in the environment tokens
            assert tool_messages and "<tool_response>" in env
        else:
            assert env == ""
    submitted = [ep for ep in episodes if ep.status == "submitted"]
    assert submitted, [(ep.status, ep.final) for ep in episodes]  # the taught model calls submit
    assert {ep.value for ep in submitted if ep.task_id == TASKS[0].id} <= {1.0}


def test_a_sandbox_failure_is_retried_then_left_unscored(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every grading fails: each episode is tried twice by the scheduler, then reaches TRL as
    ``None`` (unscorable), never as a 0; nothing moves the weights."""

    class Dead(DeadSandbox):
        pool_size = 1

    async def dead(pool_size: int, ray: str | None = None) -> Any:
        return Dead()

    monkeypatch.setattr(SANDBOXES, "get", dead)
    seen: list[list[Group]] = []
    rollout = DojoRollout(TASKS, mode="single", pool_size=1, on_groups=seen.append)
    trainer, (out,) = _train(tiny_model_dir, tmp_path, rollout)
    assert out["dojo_reward"] == [None] * 4
    episodes = [ep for group in seen[0] for ep in group.episodes]
    assert all(ep.status == "infra_error" and ep.attempt == 1 and "slot died" in (ep.error or "") for ep in episodes)
    log = next(entry for entry in trainer.state.log_history if "loss" in entry)
    assert float(log["loss"]) == 0.0 and float(log["grad_norm"]) == 0.0


def test_a_pool_server_that_misses_a_weight_push_gets_no_request(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``policy.server: [a, b]``: the weights go to both before each step; a server that did not load
    them would sample from stale weights, so the pool sends it nothing (here: one server is down)."""
    from dojo.agent.policy import PolicyError
    from dojo.agent.policy_pool import PolicyPool

    proc, base = _serve(tiny_model_dir)
    try:
        dead = f"http://127.0.0.1:{free_port()}"
        weights = ServedWeights([f"{dead}/v1", base], tmp_path / "sync")
        pool = PolicyPool([OpenAIPolicy(f"{dead}/v1", "tiny", timeout=5), OpenAIPolicy(f"{base}/v1", "tiny")])
        rollout = DojoRollout(TASKS, max_turns=1, mode="single", pool_size=1, policy=pool, weights=weights)
        _, captured = _train(tiny_model_dir, tmp_path / "run", rollout)
        assert weights.loaded == [base] and list(weights.failed) == [dead] and weights.pushes == 1
        stats = {s["server"]: s for s in pool.stats()}
        assert stats[f"{dead}/v1"]["stale"] and stats[f"{dead}/v1"]["requests"] == 0
        assert stats[f"{base}/v1"]["requests"] > 0
        assert all(r is not None for r in captured[0]["dojo_reward"])  # every episode scored
        with pytest.raises(PolicyError, match="cannot push weights"):
            ServedWeights([dead], tmp_path / "sync2").push(_tiny_model(tiny_model_dir))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _tiny_model(model_dir: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir)


def test_an_episode_without_a_token_record_is_unscorable(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    rollout = DojoRollout(TASKS)
    reward = Reward(value=1.0, verdict="pass", passed=1, total=1)
    first = Completion(text="a", token_ids=[5], logprobs=[-0.1], prompt_token_ids=[1, 2])
    second = Completion(text="b", token_ids=[6], logprobs=[-0.2], prompt_token_ids=[1, 2, 9, 7])  # not [1, 2, 5, ...]
    ep = Episode(
        episode_id="e", task_id="t", group_id="t", sample_index=0, status="answered", messages=[{"role": "user",
        "content": "p"}], turns=[TurnRecord(index=0, completion=first), TurnRecord(index=1, completion=second)],
        reward=reward,
    )  # fmt: skip
    tokens, value = rollout._row(ep, tokenizer)
    assert value is None and tokens.env_mask == [0] and rollout.token_mismatches == 1
    chained = ep.model_copy(update={"turns": [ep.turns[0]]})
    tokens, value = rollout._row(chained, tokenizer)
    assert value == 1.0 and tokens.prompt_ids == [1, 2] and tokens.completion_ids == [5]
    # a prompt that alone fills the model's context: nothing sampled (HFPolicy raises ContextFull), so
    # nothing to train on; TRL needs a token in every row (an empty one crashed dojo train on SciCode's longest prompts)
    full = "This model's maximum context length is 2048 tokens. However, your request has 5000 input tokens."
    overflow = ep.model_copy(update={"turns": [], "status": "prompt_too_long", "reward": None, "error": full})
    tokens, value = rollout._row(overflow, tokenizer)
    assert value is None and tokens.completion_ids == [tokenizer.eos_token_id] and tokens.env_mask == [0]
    assert rollout.context_overflows == 1
    long = Completion(text="", finish_reason="length", token_ids=[], logprobs=[], prompt_token_ids=list(range(5000)))
    tokens, value = rollout._row(ep.model_copy(update={"turns": [TurnRecord(index=0, completion=long)]}), tokenizer)
    assert tokens.prompt_ids == list(range(5000))[-UNSCORABLE_PROMPT_TOKENS:]  # TRL runs the model over it all
    assert value is None and rollout.context_overflows == 1  # (a reply of no token: not the context's doing)


def _serve(model_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "dojo.cli", "policy", "serve", str(model_dir), "--port", str(port), "--name", "tiny"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/v1/models", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"dojo policy serve did not start: {proc.stderr.read().decode() if proc.stderr else ''}")


def _served_logprobs(base: str, messages: list[dict[str, Any]]) -> list[float]:
    body = {"model": "tiny", "messages": messages, "max_tokens": 6, "temperature": 0, "logprobs": True}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60).json()
    return [t["logprob"] for t in reply["choices"][0]["logprobs"]["content"]]


def test_a_served_policy_gets_the_trainers_weights_each_step(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``dojo policy serve`` samples the episodes; before each step's generation the trainer's
    weights are pushed to it, so after training the server computes what the trained model does."""
    import torch

    proc, base = _serve(tiny_model_dir)
    try:
        weights = ServedWeights(base, tmp_path / "sync")
        policy = OpenAIPolicy(f"{base}/v1", "tiny")
        rollout = DojoRollout(TASKS, max_turns=2, pool_size=1, policy=policy, weights=weights)
        trainer, captured = _train(tiny_model_dir, tmp_path / "run", rollout, steps=2)
        assert weights.pushes == 2 and httpx.get(f"{base}/v1/models").json()["data"][0]["weight_updates"] == 2
        assert all(r is not None for r in captured[0]["dojo_reward"])  # the served turns chain token-exactly
        before = _served_logprobs(base, TASKS[0].messages())
        model = trainer.model.eval()
        with torch.no_grad():  # a step that moved the weights (the random model's rewards are all 0)
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        weights.push(model, trainer.processing_class)
        after = _served_logprobs(base, TASKS[0].messages())
        assert before != after
        tokenizer = trainer.processing_class
        text = tokenizer.apply_chat_template(TASKS[0].messages(), add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=6, do_sample=False, output_logits=True,
                                 return_dict_in_generate=True)  # fmt: skip
        chosen = out.sequences[0, len(ids) :]
        local = torch.log_softmax(torch.stack(out.logits, dim=1)[0].float(), -1).gather(-1, chosen[:, None])
        assert after == pytest.approx(local.squeeze(-1).tolist(), abs=1e-4)
        bad = httpx.post(f"{base}/update_weights_from_disk", json={"model_path": str(tmp_path / "none")})
        assert bad.status_code == 400 and "no config.json" in bad.json()["message"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="max_turns"):
        DojoRollout(TASKS, max_turns=0)
    with pytest.raises(InputError, match="mode"):
        DojoRollout(TASKS, mode="chat")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="needs the dataset's tasks"):
        DojoRollout([])
    with pytest.raises(InputError, match="pass policy="):
        DojoRollout(TASKS, weights=ServedWeights("http://127.0.0.1:1", "/tmp/x"))
    rollout = DojoRollout(TASKS)
    with pytest.raises(InputError, match="not among the tasks"):
        rollout.task_of("an unknown prompt")
    with pytest.raises(InputError, match="no `dojo_reward`"):
        episode_reward(["p"], ["c"])


async def test_a_reply_given_twice_to_a_task_is_graded_once() -> None:
    """GradeOnce: the copies of a reply take its first copy's reward; a copy that finds an
    infrastructure failure is graded itself; the stats count every copy."""
    runs: list[tuple[str, str]] = []
    failing = {"x + 2"}

    class Counting(GradeOnce):
        async def _grade(self, task: Any, completion: str, seed: int | None) -> Reward:
            runs.append((task.id, completion))
            await asyncio.sleep(0.01)  # the copies arrive while the first is still being graded
            if completion in failing:
                failing.discard(completion)  # the sandbox fails once
                return Reward(value=None, verdict="infrastructure_error", error="slot died")
            return Reward(value=float(completion == task.reference), verdict="pass")

    grader = Counting(DeadSandbox())  # type: ignore[arg-type]
    a, b = TASKS
    ref = a.reference
    assert ref is not None
    items = [(a, ref), (a, ref), (b, ref), (a, "x + 2"), (a, "x + 2"), (a, ref)]
    rewards = await asyncio.gather(*(grader.grade(t, c) for t, c in items))
    assert [r.value for r in rewards] == [1.0, 1.0, 0.0, None, 0.0, 1.0]
    # a.reference on a once, on b once; "x + 2" failed, so its copy ran again
    assert sorted(runs) == sorted([(a.id, ref), (b.id, ref), (a.id, "x + 2"), (a.id, "x + 2")])
    assert grader.shared == 2 and grader.stats.scored == 5 and sum(grader.stats.verdicts.values()) == 6
