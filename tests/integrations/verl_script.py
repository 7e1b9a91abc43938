"""Run by tests/integrations/test_verl.py in a subprocess with verl's classes on the path
(.verl-deps). Exercises DojoSandboxTool and DojoAgentLoop through verl's own base classes and
prints one JSON line of what happened."""

from __future__ import annotations

import asyncio
import json
import sys
from types import SimpleNamespace
from typing import Any

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, DictConfigWrap
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as registry
from verl.tools.base_tool import BaseTool
from verl.workers.rollout.replica import TokenOutput

from dojo.integrations.verl import DojoAgentLoop, verl_rows
from dojo.tasks.families import generate_tasks

REPLIES = ["x * 3", "x + 1 if x < 2 else 0", "x * 3", "x + 1"]  # 0/4, 2/4, 0/4 again, 4/4 visible tests


class ScriptedServer:
    """verl's server manager answering ``REPLIES`` in turn (ends each with EOS, as a model does)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.calls = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw: Any
    ) -> TokenOutput:
        text = REPLIES[self.calls]
        self.calls += 1
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids))


def prm_script(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """A served process reward model: a step is good when it is the right function body."""
    return json.dumps({"score": 1.0 if messages[-1]["content"].endswith("x + 1") else 0.0})


class TinyServer:
    """verl's server manager, answered by a local Hugging Face model (what vLLM does on a cluster)."""

    def __init__(self, model_dir: str) -> None:
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(model_dir)
        self.calls = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw: Any
    ) -> TokenOutput:
        import torch

        self.calls += 1
        ids = torch.tensor([prompt_ids])
        out = self.model.generate(
            ids, do_sample=True, max_new_tokens=8, top_k=0, output_logits=True, return_dict_in_generate=True
        )
        new = out.sequences[0, len(prompt_ids) :]
        lps = torch.log_softmax(torch.stack(out.logits, 1)[0].float(), -1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        return TokenOutput(token_ids=new.tolist(), log_probs=lps.tolist())


async def main(model_dir: str) -> None:
    from hydra.utils import instantiate
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import ToolListWrap

    task = next(t for t in generate_tasks("arith", 3000, seed=0) if t.reference == "x + 1")
    row = verl_rows([task], agent_name="dojo_feedback")[0]
    report: dict[str, Any] = {}

    # the tools, loaded from the shipped config by verl's own loader, then driven as verl's tool
    # agent loop drives them: create, execute, release for every call
    from verl.tools.tool_registry import initialize_tools_from_config

    tools = initialize_tools_from_config("examples/verl/dojo_tools.yaml")
    report["tool_names"] = [t.name for t in tools]
    run, submit = tools[0], tools[2]
    report["tool_is_base_tool"] = isinstance(run, BaseTool)
    agent = SimpleNamespace(request_id="req-1")
    observations = []
    for tool, params in ((run, {"code": "print(6 * 7)"}), (submit, {"code": "x + 1"})):
        create_kwargs = row["extra_info"]["tools_kwargs"][tool.name]["create_kwargs"]
        iid, _ = await tool.create(create_kwargs=create_kwargs)
        response, _, _ = await tool.execute(iid, params, agent_data=agent)
        observations.append(response.text)
        if tool is submit:
            report["calc_reward"] = await tool.calc_reward(iid, agent_data=agent)
        await tool.release(iid)
    report["observations"] = observations
    report["schema_names"] = [run.tool_schema.function.name, submit.tool_schema.function.name]

    # the agent loop, built the way verl's AgentLoopWorker builds it
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": 256}}})
    data_config = OmegaConf.create({"apply_chat_template_kwargs": {}})
    server = TinyServer(model_dir)
    loops = OmegaConf.load("examples/verl/dojo_agent_loops.yaml")

    def make_loop(entry: Any, trainer_config: Any, server_manager: Any) -> Any:
        """An agent loop from its loop config entry, as verl's AgentLoopWorker instantiates it."""
        return instantiate(
            config=entry,
            trainer_config=DictConfigWrap(trainer_config),
            server_manager=server_manager,
            tokenizer=tokenizer,
            processor=None,
            hf_model_type=None,
            dataset_cls=None,
            data_config=DictConfigWrap(data_config),
            tools=ToolListWrap([]),
        )

    loop = make_loop(loops[0], config, server)
    report["loop_is_agent_loop_base"] = isinstance(loop, AgentLoopBase) and isinstance(loop, DojoAgentLoop)
    report["registered"] = "dojo_feedback" in registry and loops[0]["_target_"].endswith(DojoAgentLoop.__name__)
    kwargs = {
        "raw_prompt": row["prompt"],
        "extra_info": {**row["extra_info"], "max_turns": 2},
        "reward_model": row["reward_model"],
    }
    out = await loop.run({"temperature": 1.0}, **kwargs)
    report["output_is_agent_loop_output"] = isinstance(out, AgentLoopOutput)
    mask = out.response_mask
    report["turns"] = out.extra_fields["dojo_turns"]
    report["server_calls"] = server.calls
    report["mask_zeros"] = mask.count(0)
    report["lengths_match"] = len(out.response_ids) == len(mask) == len(out.response_logprobs)
    env = [t for t, m in zip(out.response_ids, mask, strict=True) if m == 0]
    report["env_text"] = tokenizer.decode(env)
    report["reward_score"] = out.reward_score
    report["as_dict_keys"] = sorted(out.as_dict()) if hasattr(out, "as_dict") else []
    report["turn_scores"] = out.extra_fields["turn_scores"]

    # per-turn rewards: the loop built by hydra from the shipped loop config, as verl builds it (its
    # process section overridden, and a served process reward model), against EpisodeRunner on the
    # same replies with the same ProcessScorer
    from dojo.agent.episode import EpisodeConfig, EpisodeRunner
    from dojo.agent.turn_rewards import ProcessScorer
    from dojo.integrations.event_loops import SANDBOXES
    from dojo.integrations.trl_rollout import turn_totals
    from dojo.rewards import Grader
    from dojo.rewards.judge_client import JudgeEndpoint
    from dojo.rewards.process import ProcessRewardConfig, ServedPRM
    from tests.agent.scripted import ScriptedPolicy
    from tests.rewards.judge_server import serve_judge

    report["shipped_process"] = OmegaConf.to_container(loops[0]["process"])
    weights = {"repeat_penalty": 0.3, "prm_weight": 0.5}
    long = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": 4096}}})
    scripted = {**kwargs, "extra_info": {**row["extra_info"], "max_turns": 5}}
    async with serve_judge(prm_script) as url:
        entry = OmegaConf.merge(loops[0], {"process": weights, "prm": {"base_url": url, "retries": 0}})
        out = await make_loop(entry, long, ScriptedServer(tokenizer)).run({"temperature": 1.0}, **scripted)
        report["scripted_turns"] = out.extra_fields["dojo_turns"]
        report["scripted_reward"] = out.reward_score
        report["scripted_turn_scores"] = out.extra_fields["turn_scores"]
        prm = ServedPRM(JudgeEndpoint(base_url=url, retries=0))
        policy = ScriptedPolicy(lambda messages, i: REPLIES[i])
        runner = EpisodeRunner(
            policy,
            Grader(await SANDBOXES.get(2)),
            EpisodeConfig(mode="feedback", max_turns=5),
            process=ProcessScorer(ProcessRewardConfig(**weights), prm),
        )
        episode = await runner.run(task)
        await prm.aclose()
    report["runner_turn_scores"] = turn_totals(episode)
    off = OmegaConf.merge(loops[0], {"process": False})
    out = await make_loop(off, long, ScriptedServer(tokenizer)).run({"temperature": 1.0}, **scripted)
    report["off_turn_scores"] = out.extra_fields["turn_scores"]
    report["off_turns"] = out.extra_fields["dojo_turns"]

    # a response budget that the first reply and its feedback fill: no turn is graded whose tokens
    # are cut off (the right second reply had been graded, 1.0, while only the wrong first one trained)
    for length in (64, 4):
        short = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": length}}})
        out = await make_loop(off, short, ScriptedServer(tokenizer)).run({"temperature": 1.0}, **scripted)
        trained = [t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m]
        report[f"budget_{length}"] = {
            "turns": out.extra_fields["dojo_turns"],
            "graded": out.extra_fields["dojo_final"],
            "trained": tokenizer.decode(trained, skip_special_tokens=True),
            "score": out.reward_score,
            "length": len(out.response_ids),
        }
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
