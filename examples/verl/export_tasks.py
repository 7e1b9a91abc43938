"""Write dojo tasks as verl Parquet files: python examples/verl/export_tasks.py OUT_DIR [SOURCE]."""

from __future__ import annotations

import sys
from pathlib import Path

from dojo.integrations.verl_data import export_verl_parquet  # (verl itself is not needed to export)
from dojo.tasks.families import generate_tasks
from dojo.train.data import held_out

out = Path(sys.argv[1] if len(sys.argv) > 1 else "data/dojo-verl")
family = sys.argv[2] if len(sys.argv) > 2 else "arith"
tasks = generate_tasks(family, 20_000, seed=0)
train = [t for t in tasks if not held_out(t)]
test = [t for t in tasks if held_out(t)][:500]
print(export_verl_parquet(train, out / "train.parquet", agent_name="dojo_feedback"), "training rows")
print(export_verl_parquet(test, out / "test.parquet", split="test", agent_name="dojo_feedback"), "test rows")
