"""The verl bridge: dojo tasks, sandboxes and rewards in verl's PPO/GRPO trainer on a Ray cluster.

- ``compute_score``, ``verl_rows``, ``export_verl_parquet``: see ``dojo.integrations.verl_data``
  (they do not need verl installed);
- ``DojoSandboxTool``: a verl ``BaseTool`` whose calls run in dojo's sandbox. verl's tool agent loop
  creates, executes and releases a tool instance for every call, so the episode's state (the task,
  files written, the submission) lives in a session keyed by the rollout's ``request_id``, shared
  by all three tools;
  ``config.action`` picks what the tool does: ``run_code``, ``run_tests`` or ``submit``;
- ``DojoAgentLoop`` (registered as ``dojo_feedback``): dojo's feedback episode (code → visible
  tests → feedback → fix) as a verl agent loop; feedback tokens get ``response_mask`` 0, the
  grade of the last reply is the trajectory's ``reward_score``, and each turn's process reward
  (``dojo.agent.turn_rewards.ProcessScorer``, as ``EpisodeRunner(process=...)`` gives it) goes in
  ``extra_fields["turn_scores"]``.

See ``docs/verl.md`` for a working configuration. Importing this module needs verl.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from dojo.agent.chat_turns import text_after_reply
from dojo.agent.episode import TurnRecord
from dojo.agent.feedback import feedback_step
from dojo.agent.policy import Completion, ToolCall
from dojo.agent.tools import TOOL_NAMES, Toolbox, tool_specs
from dojo.agent.turn_rewards import ProcessScorer
from dojo.integrations.event_loops import SANDBOXES
from dojo.integrations.verl_data import (
    RewardUnavailable,
    compute_score,
    export_verl_parquet,
    load_task,
    verl_rows,
)
from dojo.rewards import Grader, GradingConfig
from dojo.rewards.config import DEFAULT_GRADING
from dojo.rewards.judge_client import JudgeEndpoint, JudgeUnavailable
from dojo.rewards.process import ProcessRewardConfig, ServedPRM
from dojo.sandbox import Limits
from dojo.tasks.model import Task

__all__ = [
    "DojoAgentLoop",
    "DojoSandboxTool",
    "RewardUnavailable",
    "compute_score",
    "export_verl_parquet",
    "verl_rows",
]

log = logging.getLogger(__name__)
_ACTIONS = ("run_code", "run_tests", "submit")


@dataclass
class _Session:
    """One episode's state, shared by every DojoSandboxTool of the process: the task and files
    (in the toolbox) and the first submission."""

    toolbox: Toolbox
    submission: str | None = None


_SESSIONS: OrderedDict[str, _Session] = OrderedDict()  # by request id, oldest first


class DojoSandboxTool(BaseTool):  # type: ignore[misc]
    """A verl tool that runs in dojo's sandbox. ``config``: ``action`` (run_code, run_tests, submit),
    optional ``pool_size``, ``max_sessions`` (sessions kept, oldest dropped first) and
    ``max_observation_chars``. The task comes from ``tools_kwargs`` (``create_kwargs.task``), as
    ``export_verl_parquet`` writes it."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        action = config.get("action", "run_code")
        if action not in _ACTIONS:
            raise ValueError(f"DojoSandboxTool config.action must be one of {list(_ACTIONS)}, got {action!r}")
        self.action = action
        if tool_schema is None:
            (spec,) = tool_specs([action])
            tool_schema = OpenAIFunctionToolSchema.model_validate(spec)
        super().__init__(config, tool_schema)
        self.pool_size = int(config.get("pool_size", 2))
        self.max_sessions = int(config.get("max_sessions", 4096))
        self.max_observation_chars = int(config.get("max_observation_chars", 2000))
        self.limits = Limits(**config["limits"]) if config.get("limits") else None
        self._instances: dict[str, Task] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        create_kwargs = kwargs.get("create_kwargs") or kwargs
        if "task" not in create_kwargs:
            raise ValueError(
                f"{self.name}: no task in tools_kwargs; export the dataset with "
                "dojo.integrations.verl.export_verl_parquet (extra_info.tools_kwargs carries it)"
            )
        instance_id = instance_id or uuid4().hex
        self._instances[instance_id] = load_task(create_kwargs["task"])
        return instance_id, ToolResponse()

    async def _session(self, instance_id: str, agent_data: Any) -> _Session:
        key = str(getattr(agent_data, "request_id", None) or instance_id)
        session = _SESSIONS.get(key)
        if session is None:
            task = self._instances.get(instance_id)
            if task is None:
                raise KeyError(f"{self.name}: unknown instance {instance_id!r}; call create() first")
            toolbox = Toolbox(
                task,
                await SANDBOXES.get(self.pool_size),
                tools=TOOL_NAMES,
                limits=self.limits,
                max_observation_chars=self.max_observation_chars,
            )
            session = _SESSIONS[key] = _Session(toolbox)
            while len(_SESSIONS) > self.max_sessions:
                _SESSIONS.popitem(last=False)
        _SESSIONS.move_to_end(key)
        return session

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        session = await self._session(instance_id, kwargs.get("agent_data"))
        args = {k: v for k, v in parameters.items() if v is not None}
        result = await session.toolbox.call(ToolCall(name=self.action, arguments=args))
        metrics: dict[str, Any] = {"verdict": result.verdict, "seconds": result.seconds}
        if result.infra_error is not None:
            metrics["infra_error"] = result.infra_error
            return ToolResponse(text="error: the sandbox failed (not your fault); try again"), 0.0, metrics
        if result.submitted is not None and session.submission is None:
            session.submission = result.submitted
        return ToolResponse(text=result.observation), 0.0, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The submission's grade (0 without one); raises ``RewardUnavailable`` on a sandbox failure."""
        session = await self._session(instance_id, kwargs.get("agent_data"))
        if session.submission is None:
            return 0.0
        box = session.toolbox
        reward = await Grader(box.sandbox, GradingConfig(limits=self.limits)).grade(box.task, session.submission)
        if reward.value is None:
            raise RewardUnavailable(reward.error or "the sandbox failed while grading")
        return reward.value

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)  # the session stays for the episode's next calls


@register("dojo_feedback")
class DojoAgentLoop(AgentLoopBase):  # type: ignore[misc]
    """dojo's feedback episode as a verl agent loop. Settings come from the dataset row's
    ``extra_info``: ``max_turns`` (default 2) and ``reward_mode`` (default: ``GradingConfig``'s).

    Per-turn rewards come from the agent loop config (``agent_loop_config_path``'s entry, which
    verl passes to the constructor): ``process``, the fields of ``ProcessRewardConfig`` (default:
    its defaults; ``false`` or ``null`` for none), and ``prm``, the fields of ``JudgeEndpoint`` of a served
    process reward model (``ServedPRM``, weighted by ``process.prm_weight``)."""

    def __init__(
        self,
        *args: Any,
        process: Mapping[str, Any] | bool | None = True,
        prm: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.process_config: ProcessRewardConfig | None = None
        if process is True:
            self.process_config = ProcessRewardConfig()
        elif isinstance(process, Mapping):  # verl hands a DictConfig
            self.process_config = ProcessRewardConfig.model_validate(dict(process))
        self.prm_endpoint = JudgeEndpoint.model_validate(dict(prm)) if prm else None

    async def turn_scores(
        self, task: Task, turns: list[TurnRecord], verdict: str | None = None, flags: Sequence[str] = ()
    ) -> list[float]:
        """Each turn's process reward (its ``total``); [] without a process config, or when the
        process reward model failed (no made-up scores)."""
        if self.process_config is None:
            return []
        prm = ServedPRM(self.prm_endpoint) if self.prm_endpoint is not None else None
        try:
            rewards = await ProcessScorer(self.process_config, prm).score_turns(task, turns, verdict, flags)
        except JudgeUnavailable as e:
            log.warning("no per-turn rewards for %s: the process reward model failed: %s", task.id, e)
            return []
        finally:
            if prm is not None:
                await prm.aclose()
        return [parts["total"] for parts in rewards]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = [dict(m) for m in kwargs["raw_prompt"]]
        extra = kwargs.get("extra_info") or {}
        task = load_task(kwargs["reward_model"]["ground_truth"])
        max_turns = int(extra.get("max_turns", 2))
        response_length = int(self.rollout_config.response_length)
        prompt_ids = list(
            self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        )
        sandbox = await SANDBOXES.get(2)
        toolbox = Toolbox(task, sandbox)
        ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        metrics = AgentLoopMetrics()
        final, turns, failed = "", 0, False
        records: list[TurnRecord] = []  # as EpisodeRunner records a feedback episode's turns
        request_id = uuid4().hex
        for turn in range(max_turns):
            room = response_length - len(ids)  # what is graded is what is trained: a turn past the
            if room <= 0:  # response is not asked for, and a reply is cut where the response ends (a
                break  # turn after feedback that filled it was graded while its tokens were cut off)
            t0 = time.perf_counter()
            out = await self.server_manager.generate(
                request_id=request_id, prompt_ids=prompt_ids + ids, sampling_params=sampling_params
            )
            metrics.generate_sequences += time.perf_counter() - t0
            reply = list(out.token_ids)[:room]
            ids += reply
            mask += [1] * len(reply)
            logprobs += list(out.log_probs or [0.0] * len(out.token_ids))[: len(reply)]
            final = self.tokenizer.decode(reply, skip_special_tokens=True)
            turns += 1
            last = turn + 1 == max_turns or len(ids) >= response_length  # out of turns or of tokens
            step = await feedback_step(toolbox, final, last_turn=last)
            check = step.tool_result(final)
            completion = Completion(text=final, token_ids=reply)
            records.append(TurnRecord(index=turn, completion=completion, tool_results=[check] if check else []))
            metrics.tool_calls += step.seconds
            failed = step.outcome == "infra_error"
            if step.done:
                break
            assert step.message is not None
            messages += [{"role": "assistant", "content": final}, step.message]
            eos = self.tokenizer.eos_token_id
            suffix = text_after_reply(
                self.tokenizer,
                messages,
                len(messages) - 2,
                ended_with_eos=bool(reply) and reply[-1] == eos,
            )
            env_ids = self.tokenizer(suffix, add_special_tokens=False)["input_ids"]
            ids += env_ids
            mask += [0] * len(env_ids)
            logprobs += [0.0] * len(env_ids)
        score: float | None = None
        turn_scores: list[float] = []
        if not failed:
            t0 = time.perf_counter()
            reward = await Grader(sandbox, GradingConfig(mode=extra.get("reward_mode", DEFAULT_GRADING.mode))).grade(
                task, final
            )
            metrics.compute_score += time.perf_counter() - t0
            score = reward.value  # None after a sandbox failure: verl's reward function grades it instead
            if score is not None:  # per-turn rewards of scored episodes only, as EpisodeRunner gives them
                turn_scores = await self.turn_scores(task, records, reward.verdict, reward.flags)
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=ids[:response_length],
            response_mask=mask[:response_length],
            response_logprobs=logprobs[:response_length],
            reward_score=score,
            num_turns=2 * turns,
            metrics=metrics,
            extra_fields={"dojo_turns": turns, "dojo_final": final, "turn_scores": turn_scores, "tool_rewards": []},
        )
