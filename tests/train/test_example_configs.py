"""Each example ``dojo train`` config of the task families loads, validates and names a source that loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from dojo.tasks import load_source
from dojo.train.config import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    "name",
    [
        "train-doc-analysis.yaml",
        "train-scene3d.yaml",
        "train-data-analysis.yaml",
        "train-scientific.yaml",
        "train-scicode.yaml",
        "train-documents.yaml",
    ],
)
def test_an_example_config_loads_and_its_source_generates(name: str) -> None:
    config = load_config(EXAMPLES / name)
    assert config.reward.mode == "fraction"
    tasks = load_source(f"{config.tasks.source}?n=2")
    assert len(tasks) == 2 and all(t.reference for t in tasks)
