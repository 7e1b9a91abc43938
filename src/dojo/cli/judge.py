"""``dojo judge``: spot checks of a judge: draw a review set from a run, label it, measure agreement."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dojo.cli.output import console, err_console, fail, writable_file
from dojo.errors import InputError

judge_app = typer.Typer(
    help="Spot checks of a judge: review sets, labelling, agreement with people.", no_args_is_help=True
)


@judge_app.command()
def sample(
    run: Annotated[str, typer.Argument(help="A run's trajectory store (a directory or fsspec URL).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The review set's directory.")] = Path("review"),
    rate: Annotated[float, typer.Option(help="Share of judged items drawn, in (0, 1].")] = 0.02,
    seed: Annotated[int, typer.Option(help="Seed of the draw.")] = 0,
    threshold: Annotated[float, typer.Option(help="A judge score at or above it is the judge's pass.")] = 0.5,
) -> None:
    """Draw judged items (rows with a judge score among their components) from a run into a review set."""
    from dojo.rewards.review import ITEMS, draw, write_items
    from dojo.rollout.store import TrajectoryStore

    if not 0 < rate <= 1:
        fail(f"--rate must be in (0, 1], got {rate}")
    if (out / ITEMS).exists():
        fail(f"{out / ITEMS} exists; choose a new --out (labels made on it would no longer match)")
    try:
        store = TrajectoryStore(run, read_only=True)
        if not store.shards():
            fail(f"{run} holds no trajectories (no shard-*.parquet)")
        columns = ["episode_id", "run_id", "task_id", "prompt", "final", "components"]
        items = draw(store.read(columns).to_pylist(), rate, seed=seed, threshold=threshold)
    except InputError as e:
        fail(str(e))
    if not items:
        fail(f"no judged item drawn from {run} (rows need a judge component; try a higher --rate)")
    n = write_items(out, items)
    console.print(f"drew {n} judged item(s) into {out / ITEMS}; label them with: dojo judge label {out}")


@judge_app.command()
def label(
    review: Annotated[Path, typer.Argument(help="A review set's directory (from dojo judge sample).")],
    labeller: Annotated[str, typer.Option(help="Your name, stored with each label.")] = "human",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port on 127.0.0.1.")] = 8765,
    labels: Annotated[str, typer.Option(help="The label set, comma-separated.")] = "pass,fail",
) -> None:
    """Serve the keyboard-driven labelling page of a review set on 127.0.0.1."""
    import uvicorn

    from dojo.service.labelling import create_labelling_app
    from dojo.service.loopback import guarded

    if not labeller.strip():
        fail("--labeller must name who labels (it is stored with each label)")
    try:
        app = create_labelling_app(review, labeller, tuple(v.strip() for v in labels.split(",") if v.strip()))
    except InputError as e:
        fail(str(e))
    err_console.print(f"labelling {review} as {labeller}: open http://127.0.0.1:{port}/ (Ctrl-C to stop)")
    uvicorn.run(guarded(app, None, "127.0.0.1"), host="127.0.0.1", port=port, log_level="warning")


def _number(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


@judge_app.command()
def agreement(
    review: Annotated[Path, typer.Argument(help="A review set's directory.")],
    labels: Annotated[
        list[Path] | None,
        typer.Option("--labels", help="Label files (JSONL) from elsewhere; default: its labels.jsonl."),
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="Write the calibration plot (PNG) here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """The judge against people: accuracy, Cohen's kappa, Krippendorff's alpha, a confusion matrix."""
    from dojo.rewards.agreement import agreement as measure
    from dojo.rewards.agreement import calibration_plot
    from dojo.rewards.review import LABELS, read_items, read_labels

    try:
        items = read_items(review)
        if not labels and not (review / LABELS).exists():
            fail(f"{review} has no labels yet ({review / LABELS}): label its items first with `dojo judge label "
                 f"{review}`, or give label files with --labels")  # fmt: skip
        found = [lab for path in (labels or [review / LABELS]) for lab in read_labels(path)]
        result = measure(items, found)
    except InputError as e:
        fail(str(e))
    if plot is not None:
        if plot.suffix.lower() not in (".png", ".svg", ".pdf"):
            fail(f"--plot {plot}: the file name must end in .png, .svg or .pdf")
        writable_file(plot, "--plot")
        calibration_plot(result.pairs, plot)
    if as_json:
        console.print_json(json.dumps(result.as_dict(), allow_nan=True).replace("NaN", "null"))
        return
    console.print(f"{result.items} labelled item(s), {result.labellers} labeller(s)")
    console.print(
        f"accuracy {result.accuracy:.3f} (disagreement {result.disagreement:.3f}), "
        f"Cohen's kappa {_number(result.kappa)}"
    )
    console.print(
        f"Krippendorff's alpha: labellers {_number(result.alpha_labellers)}, "
        f"labellers and judge {_number(result.alpha_with_judge)}"
    )
    humans = sorted({h for row in result.confusion.values() for h in row})
    table = Table(title="judge (rows) against people (columns)")
    table.add_column("judge")
    for h in humans:
        table.add_column(h, justify="right")
    for j in sorted(result.confusion):
        table.add_row(j, *(str(result.confusion[j].get(h, 0)) for h in humans))
    console.print(table)
    if plot is not None:
        console.print(f"calibration plot: {plot}")
