"""``bfcl:multi_turn_<kind>``: the Berkeley Function Calling Leaderboard's 800 multi-turn tasks, from
the ``bfcl-eval`` wheel (installed without its dependencies; its files are read here, and its
simulated APIs run only inside the sandbox, from an environment adopted from the installed wheel).

Each task is a ``tools`` task with an ``api`` (``ApiScenario``): the API classes involved (a file
system, messaging, posting, tickets, trading, travel booking, vehicle control, maths), their
initial state, the user's message of each turn, and the gold calls of each turn. A candidate's
calls run on the API in the sandbox; after each turn the API's state and the calls' results are
compared with the gold's (``dojo.rewards.simulated_api``). Kinds:

- ``multi_turn_base`` (200): every turn can be done with the tools offered;
- ``multi_turn_long_context`` (200): the same, over APIs loaded with long filler data;
- ``multi_turn_miss_func`` (200): a tool the request needs is held back until a later turn (the
  user then says only that functions were added); the turn that needs it has no gold call;
- ``multi_turn_miss_param`` (200): one turn lacks a parameter the call needs: it has no gold
  call, and calls made with a guessed value change the state that the next turn is checked on.
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path
from typing import Any

from dojo.sandbox.environment import Environment, EnvironmentStore
from dojo.tasks.bfcl import DISTRIBUTION, MULTI_TURN_CATEGORIES, VERSION, data_dir, tool_spec
from dojo.tasks.gold_calls import api_reference
from dojo.tasks.model import ApiScenario, Message, Task, TaskMetadata, TestCase
from dojo.tasks.wheel_data import wheel_data

KINDS = MULTI_TURN_CATEGORIES
PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
STATELESS = ("MathAPI",)
ADDED_PROMPT = "I have updated some more functions you can choose from. What about now?"  # BFCL's words
SYSTEM = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. "
    "Based on the question, make one or more function calls to achieve the purpose. If none of the functions "
    "can be used, point it out. If the question lacks the parameters a function requires, ask for them and make "
    "no call.\n\nAt each turn, try your best to complete the user's requests within the turn: keep calling "
    "functions until the request is fulfilled; you see each call's result. When you have no more functions "
    "to call, reply without a call: the turn is then complete and the user may say more.\n\n"
    'Write each call as <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>.\n\n'
    "Functions:\n{functions}"
)


@functools.cache
def api_environment(store: EnvironmentStore | None = None) -> Environment:
    """The environment the simulated APIs run in: the bfcl-eval wheel as installed here and mpmath
    (the maths API's), adopted on first use; its slots preload the API modules."""
    store = store or EnvironmentStore()
    preload = [f"{PACKAGE}.{m}" for m in MODULES.values()]
    return store.adopt("bfcl-apis", [DISTRIBUTION, "mpmath"], preload=preload)


def _func_docs(classes: list[str]) -> list[dict[str, Any]]:
    docs = wheel_data(DISTRIBUTION, VERSION, "bfcl_eval/data/multi_turn_func_doc", "bfcl")
    out: list[dict[str, Any]] = []
    for name in classes:
        path = Path(docs) / f"{MODULES[name]}.json"
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


def _turn_text(messages: list[dict[str, Any]]) -> str:
    return "\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")


def load_bfcl_multi_turn(kind: str, *, n: int | None = None, seed: int = 0) -> list[Task]:
    if kind not in KINDS:
        raise ValueError(f"bfcl has no multi-turn category {kind!r}; categories: {', '.join(KINDS)}")
    root = data_dir()
    rows = [json.loads(line) for line in (root / f"BFCL_v4_{kind}.json").read_text().splitlines() if line.strip()]
    answers_path = root / "possible_answer" / f"BFCL_v4_{kind}.json"
    answers = {a["id"]: a for a in (json.loads(x) for x in answers_path.read_text().splitlines() if x.strip())}
    if n is not None:
        rows = random.Random(seed).sample(rows, min(n, len(rows)))
    env = api_environment().ref
    tasks = []
    for row in rows:
        unknown = [c for c in row["involved_classes"] if c not in MODULES]
        if unknown:
            raise ValueError(f"bfcl:{kind}: task {row['id']} uses API classes dojo does not know: {unknown}")
        tools = [tool_spec(f) for f in _func_docs(row["involved_classes"])]
        added = {int(turn): list(names) for turn, names in row.get("missed_function", {}).items()}
        turns = [_turn_text(q) for q in row["question"]]
        for turn, names in added.items():  # the user's words, and the new functions for a model without native tools
            docs = [t["function"] for t in tools if t["function"]["name"] in names]
            turns[turn] = turns[turn] or f"{ADDED_PROMPT}\n\nFunctions added:\n{json.dumps(docs, indent=1)}"
        api = ApiScenario(
            classes=row["involved_classes"],
            modules={c: f"{PACKAGE}.{MODULES[c]}" for c in row["involved_classes"]},
            config=row.get("initial_config", {}),
            stateless=[c for c in row["involved_classes"] if c in STATELESS],
            long_context="long_context" in kind,
            turns=turns,
            added=added,
        )
        first = [t["function"] for t in api.offered(tools, 0)]
        task = Task(
            id=f"bfcl:{row['id']}",
            domain="tool_calling",
            form="tools",
            prompt=[
                Message(role="system", content=SYSTEM.format(functions=json.dumps(first, indent=1))),
                Message(role="user", content=turns[0]),
            ],
            tools=tools,
            api=api,
            tests=[TestCase(expected={"turns": answers[row["id"]]["ground_truth"]})],
            environment=env,
            metadata=TaskMetadata(source=f"bfcl:{kind}", tags=[kind, *row["involved_classes"]],
                                  difficulty=min(1.0, len(turns) / 10)),
        )  # fmt: skip
        tasks.append(task.model_copy(update={"reference": api_reference(task)}))
    return tasks
