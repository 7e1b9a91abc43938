"""The ``dojo`` command line: one module per command group.

- ``sandbox``: ``dojo run``, ``dojo serve``, ``dojo languages``, ``dojo demo``;
- ``env``: ``dojo env build|list|show|rm``;
- ``tasks``: ``dojo tasks audit|export``;
- ``policy``: ``dojo policy tiny|serve``;
- ``judge``: ``dojo judge sample|label|agreement``;
- ``rollout``: ``dojo rollout``;
- ``train``: ``dojo train``;
- ``dashboard``: ``dojo dashboard``;
- ``output``: the consoles and the one error helper.
"""

from __future__ import annotations

import typer

from dojo.cli.dashboard import dashboard
from dojo.cli.env import env_app
from dojo.cli.judge import judge_app
from dojo.cli.policy import policy_app
from dojo.cli.rollout import rollout
from dojo.cli.sandbox import demo, languages, run, serve
from dojo.cli.tasks import tasks_app
from dojo.cli.train import train

app = typer.Typer(help="dojo: agent RL post-training engine.", no_args_is_help=True, add_completion=False)
app.add_typer(tasks_app, name="tasks")
app.add_typer(env_app, name="env")
app.add_typer(policy_app, name="policy")
app.add_typer(judge_app, name="judge")
for command in (run, serve, languages, demo, train, rollout, dashboard):
    app.command()(command)

__all__ = ["app"]
