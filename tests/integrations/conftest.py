from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dojo.agent.tiny_model import TinyModelSpec, build_tiny_model
from dojo.sandbox import ExecutionResult
from dojo.tasks.families import generate_tasks
from dojo.tasks.model import Task

SUBMIT_X_PLUS_1 = '<tool_call>\n{"name": "submit", "arguments": {"code": "x + 1"}}\n</tool_call>'


def arith_tasks(references: list[str]) -> list[Task]:
    """The first ``arith`` task with each reference solution."""
    pool = generate_tasks("arith", 3000, seed=0)
    return [next(t for t in pool if t.reference == ref) for ref in references]


def _teach_submit(path: Path, prompts: list[str]) -> Path:
    """Teach the tiny model at ``path`` (a few seconds of supervised steps) to answer each of
    ``prompts`` with one tool call, ``submit(code="x + 1")``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    c = tok(SUBMIT_X_PLUS_1 + tok.eos_token, add_special_tokens=False)["input_ids"]
    rows = []
    for prompt in prompts:
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        rows.append((p + c, [-100] * len(p) + c))
    width = max(len(ids) for ids, _ in rows)
    ids = torch.tensor([i + [tok.pad_token_id] * (width - len(i)) for i, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    model.train()
    for _ in range(250):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.save_pretrained(path)
    return path


SUBMIT_SPEC = TinyModelSpec(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2)


@pytest.fixture(scope="session")
def submitting_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model taught to answer the chat prompts of the tasks ``x + 1`` and ``x * 2``, rendered
    as TRL renders them (with the tools), with one tool call, ``submit(code="x + 1")``: right for
    the first, wrong for the second. Sampled at temperature 1 it is right most of the time, not always."""
    from transformers import AutoTokenizer

    from dojo.integrations.trl_env import DojoToolEnv

    path = build_tiny_model(tmp_path_factory.mktemp("submitting-model"), SUBMIT_SPEC)
    tok = AutoTokenizer.from_pretrained(path)
    env = DojoToolEnv()
    tools = [env.run_code, env.run_tests, env.submit]
    prompts = [
        tok.apply_chat_template(task.messages(), tools=tools, add_generation_prompt=True, tokenize=False)
        for task in arith_tasks(["x + 1", "x * 2"])
    ]
    return _teach_submit(path, prompts)


@pytest.fixture(scope="session")
def text_tools_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same reply taught on the prompts of dojo's ``tools`` episodes (the tool format described
    in a system message, tool calls written as text)."""
    from transformers import AutoTokenizer

    from dojo.agent.episode import EpisodeConfig, EpisodeRunner

    path = build_tiny_model(tmp_path_factory.mktemp("text-tools-model"), SUBMIT_SPEC)
    tok = AutoTokenizer.from_pretrained(path)
    runner = EpisodeRunner(None, None, EpisodeConfig(mode="tools", native_tools=False))  # type: ignore[arg-type]
    prompts = [
        tok.apply_chat_template(runner._initial_messages(task), add_generation_prompt=True, tokenize=False)
        for task in arith_tasks(["x + 1", "x * 2"])
    ]
    return _teach_submit(path, prompts)


class DeadSandbox:
    """A sandbox whose every run is an infrastructure failure (a slot that died)."""

    async def run(self, program: Any, limits: Any = None, **kw: Any) -> ExecutionResult:
        return ExecutionResult.from_sandbox_error("slot died", "python")

    async def run_many(self, programs: Any, limits: Any = None) -> list[ExecutionResult]:
        return [await self.run(p) for p in programs]

    async def close(self) -> None:
        pass


def grpo_args(out: Path, **settings: Any) -> Any:
    """A CPU ``GRPOConfig`` for one short test run; ``settings`` override the shared defaults."""
    from trl import GRPOConfig

    defaults: dict[str, Any] = {
        "max_steps": 1, "per_device_train_batch_size": 4, "num_generations": 2, "learning_rate": 1e-3,
        "bf16": False, "use_cpu": True, "report_to": [], "save_strategy": "no", "disable_tqdm": True,
        "logging_steps": 1,
    }  # fmt: skip
    return GRPOConfig(output_dir=str(out), **{**defaults, **settings})
