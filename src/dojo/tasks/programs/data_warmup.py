"""The data environments' warm-up (``dojo.tasks.analysis.DATA_WARMUP``): the zygote of a
``dojo-data`` or ``dojo-analysis`` slot runs this once, after importing the preloaded modules, so
each run's first call of a pandas path (a CSV parsed, a merge, a groupby, the ``.str`` accessor, a
Parquet table converted) finds built what it builds lazily. Only calls that start no thread (see
``dojo.tasks.analysis``). Runs inside the sandbox; imports what the environment provides.
"""

import io

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

frame = pd.DataFrame(
    {"key": ["a", "b", "a"], "n": [1, 2, 3], "x": [1.5, None, 2.5], "day": ["2024-01-02", "2024-02-03", "2024-03-04"]}
)
sink = io.BytesIO()
pq.write_table(pa.Table.from_pandas(frame, nthreads=1), sink)
table = pq.ParquetFile(pa.BufferReader(sink.getvalue())).read(use_threads=False).to_pandas(use_threads=False)
other = pd.read_csv(io.StringIO("key,name,w\na,x,1\nb,y,2\n"))
joined = table.merge(other, on="key")
joined["v"] = joined["n"] * joined["x"].fillna(0) * (1 - joined["w"])
joined["month"] = joined["day"].str[:7]
joined["when"] = pd.to_datetime(joined["day"])
by = joined.groupby("name")["v"].agg(["sum", "mean", "count"]).sort_values("sum", ascending=False)
summary = (
    {k: float(v) for k, v in by["sum"].items()},
    float(joined.loc[joined["name"] == "x", "v"].sum()),
    joined.describe(),
    joined["x"].std(ddof=1),
    joined["n"].corr(joined["w"]),
)
