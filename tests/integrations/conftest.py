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


@pytest.fixture(scope="session")
def submitting_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model taught (a few seconds of supervised steps) to answer the chat prompts of the
    tasks ``x + 1`` and ``x * 2`` with one tool call, ``submit(code="x + 1")``: right for the first,
    wrong for the second. Sampled at temperature 1 it is right most of the time, not always."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dojo.integrations.trl_env import DojoToolEnv

    spec = TinyModelSpec(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2)
    path = build_tiny_model(tmp_path_factory.mktemp("submitting-model"), spec)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    env = DojoToolEnv()
    tools = [env.run_code, env.run_tests, env.submit]
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    c = tok(SUBMIT_X_PLUS_1 + tok.eos_token, add_special_tokens=False)["input_ids"]
    rows = []
    for task in arith_tasks(["x + 1", "x * 2"]):  # rendered as TRL renders them: with the tools
        prompt = tok.apply_chat_template(task.messages(), tools=tools, add_generation_prompt=True, tokenize=False)
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
