"""tau2's own reward for scripted conversations, in a process of its own: ``python -m
tests.tasks.tau2_reference`` reads jobs (JSON on stdin: ``[[domain, tau2 task id, the customer's
lines, {"steps": [[call, ...], ...], "replies": [...]}], ...]``) and writes one reward per job (JSON
on stdout). ``test_tau2_parity`` runs it beside dojo's grading: tau2's work (loading and hashing
airline's 7 MB database three times a conversation, ~1 s) then takes the second core.

tau2's orchestrator plays each conversation (a scripted agent and user, no model; its limits: 10
tool errors, 100 steps) and ``evaluate_simulation`` scores it (ALL: the environment replay and DB
hash, the env assertions, the actions, what was said). Its LLM helpers (``litellm``, not installed)
are replaced by a stub that refuses: no evaluation here asks a model.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

TAU2_MAX_ERRORS = 10  # tau2's orchestrator defaults (dojo.rewards.simulated_api has its own copy: the
TAU2_MAX_STEPS = 100  # test compares the two, so a change on either side shows)
STOP = "###STOP###"


def tau2_api() -> types.SimpleNamespace:
    """tau2's orchestrator and evaluator, importable without litellm (a stub that refuses)."""
    if "litellm" not in sys.modules:
        try:
            import litellm  # noqa: F401
        except ImportError:
            stub = types.ModuleType("tau2.utils.llm_utils")

            def no_model(*_args: Any, **_kwargs: Any) -> Any:
                raise RuntimeError("no model is asked anything in this test")

            stub.generate = no_model  # type: ignore[attr-defined]
            stub.get_cost = lambda messages: None  # type: ignore[attr-defined]
            sys.modules.setdefault("tau2.utils.llm_utils", stub)
    from loguru import logger

    logger.disable("tau2")
    from tau2.agent.base import BaseAgent  # type: ignore[import-untyped]
    from tau2.agent.llm_agent import LLMSoloAgent  # type: ignore[import-untyped]
    from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage  # type: ignore[import-untyped]
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # type: ignore[import-untyped]
    from tau2.orchestrator.orchestrator import Orchestrator  # type: ignore[import-untyped]
    from tau2.registry import registry  # type: ignore[import-untyped]
    from tau2.user.base import BaseUser  # type: ignore[import-untyped]
    from tau2.user.user_simulator import DummyUser  # type: ignore[import-untyped]

    return types.SimpleNamespace(
        BaseAgent=BaseAgent,
        LLMSoloAgent=LLMSoloAgent,
        AssistantMessage=AssistantMessage,
        ToolCall=ToolCall,
        UserMessage=UserMessage,
        EvaluationType=EvaluationType,
        evaluate_simulation=evaluate_simulation,
        Orchestrator=Orchestrator,
        registry=registry,
        BaseUser=BaseUser,
        DummyUser=DummyUser,
    )


def scripted_agent(tau: types.SimpleNamespace, convo: dict[str, Any], solo: bool) -> Any:
    """A tau2 agent that plays ``convo``: the steps after the customer's first message (or at once,
    solo), a reply to each customer message after that (solo: the stop message)."""
    ids = iter(range(10**6))

    def next_message(self: Any, message: Any, state: Any) -> tuple[Any, Any]:
        if state["steps"]:
            calls = [tau.ToolCall(id=f"c{next(ids)}", name=c["name"], arguments=c["arguments"])
                     for c in state["steps"].pop(0)]  # fmt: skip
            return tau.AssistantMessage(role="assistant", tool_calls=calls), state
        if solo:
            return tau.AssistantMessage(role="assistant", content=STOP), state
        text = state["replies"].pop(0) if state["replies"] else "Is there anything else?"
        return tau.AssistantMessage(role="assistant", content=text), state

    methods = {
        "__init__": lambda self: None,
        "get_init_state": lambda self, message_history=None: {
            "steps": list(convo["steps"]),
            "replies": list(convo["replies"]),
        },
        "generate_next_message": next_message,
        "stop": lambda self, message=None, state=None: None,
        "set_seed": lambda self, seed: None,
    }
    base = tau.LLMSoloAgent if solo else tau.BaseAgent
    return type("ScriptedAgent", (base,), methods)()


def scripted_user(tau: types.SimpleNamespace, lines: list[str]) -> Any:
    """dojo's scripted customer in tau2's terms: its lines, then ``###STOP###``."""

    def next_message(self: Any, message: Any, state: Any) -> tuple[Any, Any]:
        text = state.pop(0) if state else STOP
        return tau.UserMessage(role="user", content=text), state

    methods = {
        "get_init_state": lambda self, message_history=None: list(lines),
        "generate_next_message": next_message,
        "is_stop": classmethod(lambda cls, message: STOP in (message.content or "")),
    }
    return type("ScriptedUser", (tau.BaseUser,), methods)()


def tau2_reward(
    tau: types.SimpleNamespace, domain: str, tau_task: Any, lines: list[str], convo: dict[str, Any]
) -> float:
    """tau2's reward for ``convo`` (the customer's ``lines``): run by its orchestrator (its limits: 10
    errors, 100 steps), scored by ``evaluate_simulation`` (ALL: the environment, actions, what was said)."""
    solo = domain == "telecom"
    make = tau.registry.get_env_constructor(domain)
    environment = make(solo_mode=True) if solo else make()
    agent = scripted_agent(tau, convo, solo)
    user = tau.DummyUser() if solo else scripted_user(tau, lines)
    run = tau.Orchestrator(domain, agent, user, environment, tau_task, max_steps=TAU2_MAX_STEPS,
                           max_errors=TAU2_MAX_ERRORS, solo_mode=solo).run()  # fmt: skip
    return float(tau.evaluate_simulation(run, tau_task, tau.EvaluationType.ALL, solo, domain).reward)


def tau2_rewards(jobs: list[tuple[str, str, list[str], dict[str, Any]]]) -> list[float]:
    """tau2's reward for each (domain, tau2 task id, the customer's lines, conversation). Run in a
    process of its own (spawned): tau2's work (loading and hashing airline's 7 MB database three
    times a conversation, ~1 s) then takes the second core while this one runs dojo's grading."""
    tau = tau2_api()
    tasks = {d: {t.id: t for t in tau.registry.get_tasks_loader(d)(None)} for d in {job[0] for job in jobs}}
    return [tau2_reward(tau, domain, tasks[domain][tid], lines, convo) for domain, tid, lines, convo in jobs]


if __name__ == "__main__":
    json.dump(tau2_rewards(json.load(sys.stdin)), sys.stdout)
