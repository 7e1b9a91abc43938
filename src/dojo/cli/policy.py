"""``dojo policy``: build the tiny local model, and serve a local model over the OpenAI API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dojo.cli.output import console, fail
from dojo.errors import InputError

policy_app = typer.Typer(help="Local policies: the tiny built-in model and an OpenAI-compatible server.",
                         no_args_is_help=True)  # fmt: skip


@policy_app.command()
def tiny(
    out: Annotated[Path, typer.Argument(help="Directory to write the model and tokenizer to.")],
    hidden_size: Annotated[int, typer.Option(min=8, max=4096, help="Width of the model (the MLP is 4x as wide).")] = 64,
    layers: Annotated[int, typer.Option(min=1, max=64, help="Transformer blocks.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of the random weights.")] = 0,
) -> None:
    """Build the tiny Qwen2-style model with a character tokenizer (random weights, nothing downloaded)."""
    from dojo.agent.tiny_model import TinyModelSpec, build_tiny_model

    if out.exists() and not out.is_dir():
        fail(f"{out} is a file; give a directory (new, or empty) for the model")
    if out.exists() and any(out.iterdir()):
        fail(f"{out} is not empty; choose a new directory")
    heads = TinyModelSpec.model_fields["num_heads"].default
    if hidden_size % (2 * heads):  # (each head's size even, for the rotary embedding)
        fail(f"--hidden-size must be a multiple of {2 * heads} ({heads} heads of an even size), got {hidden_size}")
    spec = TinyModelSpec(hidden_size=hidden_size, intermediate_size=4 * hidden_size, num_layers=layers, seed=seed)
    try:
        build_tiny_model(out, spec)
    except ValueError as e:
        fail(str(e))
    console.print(f"wrote the tiny model to {out}")


@policy_app.command()
def serve(
    model_dir: Annotated[Path, typer.Argument(help="A local Hugging Face model directory.")],
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to bind.")] = 8000,
    name: Annotated[str | None, typer.Option(help="Model name clients ask for (default: the directory name).")] = None,
    prompt_format: Annotated[
        str | None,
        typer.Option(help="chat (the tokenizer's chat template) or text (plain prompts, as dojo train's tiny model)."),
    ] = None,
) -> None:
    """Serve a local model over the OpenAI API (/v1/chat/completions, /v1/completions, /v1/models), and
    load a trainer's weights on POST /update_weights_from_disk."""
    import uvicorn

    from dojo.agent.hf_policy import HFPolicy
    from dojo.agent.policy_server import create_policy_app
    from dojo.service.loopback import guarded, is_loopback
    from dojo.service.server import check_port

    if not is_loopback(host):
        console.print(f"[yellow]warning:[/yellow] serving on {host}: anyone who can reach it can use the model")
    try:
        if prompt_format not in (None, "chat", "text"):
            raise ValueError(f"--prompt-format must be chat or text, not {prompt_format!r}")
        policy = HFPolicy.from_dir(model_dir, prompt_format=prompt_format)  # type: ignore[arg-type]
    except (ValueError, OSError) as e:
        fail(str(e))
    try:
        check_port(host, port)
    except InputError as e:
        fail(str(e))
    uvicorn.run(guarded(create_policy_app(policy, name), None, host), host=host, port=port, log_level="warning")
