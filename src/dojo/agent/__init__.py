"""Episodes: a policy works on a task over turns, with tools that run in the sandbox.

from dojo.agent import EpisodeConfig, EpisodeRunner, OpenAIPolicy
policy = OpenAIPolicy("http://127.0.0.1:8000/v1")
episode = await EpisodeRunner(policy, grader, EpisodeConfig(max_turns=3)).run(task)
print(episode.status, episode.reward)
"""

from dojo.agent.episode import SCORED_STATUSES, Episode, EpisodeConfig, EpisodeRunner, EpisodeStatus, TurnRecord
from dojo.agent.policy import Completion, OpenAIPolicy, Policy, PolicyError, SamplingParams, ToolCall
from dojo.agent.tool_calls import format_tool_call, parse_tool_calls
from dojo.agent.tools import TOOL_NAMES, Toolbox, ToolResult, tool_specs

__all__ = [
    "SCORED_STATUSES",
    "TOOL_NAMES",
    "Completion",
    "Episode",
    "EpisodeConfig",
    "EpisodeRunner",
    "EpisodeStatus",
    "OpenAIPolicy",
    "Policy",
    "PolicyError",
    "SamplingParams",
    "ToolCall",
    "ToolResult",
    "Toolbox",
    "TurnRecord",
    "format_tool_call",
    "parse_tool_calls",
    "tool_specs",
]
