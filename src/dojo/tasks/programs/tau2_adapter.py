"""dojo's adapter of tau2's domains to a simulated API (``dojo.tasks.tau2``).

Written into tau2's environment as the module ``dojo_tau2_api``: each domain's tools as one object
whose public methods are the tools, whose state is the database's hash, and whose results are
tau2's text of them (the simulated-API driver, ``dojo.rewards.programs.api_driver``, calls them).
"""

# ruff: noqa: E402 (loguru is told to keep tau2 quiet before tau2 is imported)

from collections.abc import Callable
from typing import Any

from loguru import logger

logger.disable("tau2")  # its tools log every call (to stderr, which no one reads here): time for nothing
from tau2.domains.airline.data_model import FlightDB  # type: ignore[import-untyped]
from tau2.domains.airline.tools import AirlineTools  # type: ignore[import-untyped]
from tau2.domains.airline.utils import AIRLINE_DB_PATH  # type: ignore[import-untyped]
from tau2.domains.retail.data_model import RetailDB  # type: ignore[import-untyped]
from tau2.domains.retail.tools import RetailTools  # type: ignore[import-untyped]
from tau2.domains.retail.utils import RETAIL_DB_PATH  # type: ignore[import-untyped]
from tau2.environment.environment import Environment  # type: ignore[import-untyped]

_PATHS = {"airline": (FlightDB, AIRLINE_DB_PATH), "retail": (RetailDB, RETAIL_DB_PATH)}
_DATABASES: dict[str, Any] = {}  # loaded by a domain's module (dojo_tau2_<domain>), which a slot preloads: each run
_TOOLKITS = {"airline": AirlineTools, "retail": RetailTools}  # is a fork with its own copy of it


def load_database(domain: str) -> None:
    if domain not in _DATABASES:
        db_class, path = _PATHS[domain]
        _DATABASES[domain] = db_class.load(path)


def _tool(name: str) -> Callable[..., Any]:
    def call(self: Any, **arguments: Any) -> Any:  # a failed call raises: the driver answers with its error
        return Environment.to_json_str(self._tools.use_tool(name, **arguments))

    call.__name__ = name
    return call


def _api(domain: str, class_name: str) -> type:
    def __init__(self: Any) -> None:
        load_database(domain)
        self._tools = _TOOLKITS[domain](_DATABASES[domain])

    def _load_scenario(self: Any, scenario: dict[str, Any], long_context: bool = False) -> None:
        if scenario:
            raise ValueError("tau2 tasks with an initial state are not supported")

    def _state(self: Any) -> dict[str, Any]:
        return {"db": self._tools.get_db_hash()}

    methods: dict[str, Any] = {"__init__": __init__, "_load_scenario": _load_scenario, "_state": _state}
    methods.update({name: _tool(name) for name in _TOOLKITS[domain](None).get_tools()})
    return type(class_name, (), methods)


AirlineAPI = _api("airline", "AirlineAPI")
RetailAPI = _api("retail", "RetailAPI")


def _telecom_call(name: str) -> Callable[..., Any]:
    def call(self: Any, **arguments: Any) -> Any:  # solo: the agent's tools and the phone's, as tau2 routes them
        result = self._env.make_tool_call(name, requestor="assistant", **arguments)
        self._env.sync_tools()
        return Environment.to_json_str(result)

    call.__name__ = name
    return call


_TELECOM: list[Any] = []  # the solo environment, made by dojo_tau2_telecom (preloaded: each run forks its own copy)


def telecom_environment() -> Any:
    if not _TELECOM:
        from tau2.domains.telecom.environment import get_environment  # type: ignore[import-untyped]

        _TELECOM.append(get_environment(solo_mode=True))
    return _TELECOM[0]


def _telecom_init(self: Any) -> None:
    self._env = telecom_environment()
    self._assertions = []


def _telecom_load(self: Any, scenario: dict[str, Any], long_context: bool = False) -> None:
    from tau2.data_model.tasks import EnvFunctionCall  # type: ignore[import-untyped]

    for action in scenario.get("initialization_actions", []):
        self._env.run_env_function_call(EnvFunctionCall(**action))
    self._assertions = list(scenario.get("assertions", []))


def _telecom_state(
    self: Any,
) -> dict[str, Any]:  # the results of the task's assertion functions (expected values stay outside)
    from tau2.data_model.tasks import EnvFunctionCall

    run = self._env.run_env_function_call
    return {f"assert_{i}": run(EnvFunctionCall(**a)) for i, a in enumerate(self._assertions)}


def _telecom_api(names: list[str]) -> type:
    methods: dict[str, Any] = {"__init__": _telecom_init, "_load_scenario": _telecom_load, "_state": _telecom_state}
    methods.update({name: _telecom_call(name) for name in names})
    return type("TelecomAPI", (), methods)


from tau2.domains.telecom.tools import TelecomTools  # type: ignore[import-untyped]
from tau2.domains.telecom.user_tools import TelecomUserTools  # type: ignore[import-untyped]

TelecomAPI = _telecom_api([*TelecomTools(None).get_tools(), *TelecomUserTools(None).get_tools()])
