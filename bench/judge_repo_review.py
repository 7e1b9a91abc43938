"""A served judge as a reviewer of repo edits (``dojo.rewards.repo_review``), for whoever has a GPU
and a capable model:

    vllm serve Qwen/Qwen2.5-Coder-32B-Instruct --port 8000 &     # any OpenAI-compatible server
    .venv/bin/python bench/judge_repo_review.py --judge http://127.0.0.1:8000/v1 [--samples 3]

Reviews every swe reference fix (a rejection is a false rejection) and every forgery of the repo
forgery corpus in the test's rotation (``tests/rewards/repo_forgeries.py``, both spellings; a
rejection is a catch), and prints the rates, per forgery family too. Judge failures are counted apart
(they are no verdict). No sandbox is needed: nothing runs, the judge reads the edits.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.rewards.test_repo_forgeries import ROTATION, completion, picked

from dojo.rewards.judge_client import JudgeEndpoint
from dojo.rewards.judges import JudgeConfig, JudgeGrader
from dojo.rewards.repo_review import RepoReviewer
from dojo.tasks.swe import load_swe

PACKAGES = ("toolz", "networkx", "dill", "fire", "pyflakes")  # every package with recorded swe tasks


async def review(judge: JudgeGrader, items: list[tuple[str, object, str]], concurrency: int) -> dict[str, list[str]]:
    """Verdicts by kind: ``pass``, ``reject`` or ``failed`` (no verdict), keyed by each item's group."""
    reviewer = RepoReviewer(judge)
    gate = asyncio.Semaphore(concurrency)
    out: dict[str, list[str]] = collections.defaultdict(list)

    async def one(group: str, task: object, text: str) -> None:
        async with gate:
            reward = await reviewer.grade(task, text)  # type: ignore[arg-type]
        out[group].append("failed" if reward.value is None else ("pass" if reward.verdict == "pass" else "reject"))

    await asyncio.gather(*(one(g, t, c) for g, t, c in items))
    return out


def rate(verdicts: list[str], kind: str) -> str:
    judged = [v for v in verdicts if v != "failed"]
    hit = sum(v == kind for v in judged)
    return f"{hit}/{len(judged)} ({hit / len(judged):.1%})" if judged else "n/a"


async def main(url: str, model: str | None, samples: int, concurrency: int, detect: bool) -> None:
    endpoint = JudgeEndpoint(base_url=url, model=model, temperature=0.7 if samples > 1 else 0.0, timeout=300)
    config = JudgeConfig(endpoint=endpoint, samples=samples, detect=detect)
    references = [("reference", t, t.reference or "") for p in PACKAGES for t in load_swe(p)]
    forgeries = [(g.forgery.family, picked(g.task), completion(g)) for g in ROTATION]
    async with JudgeGrader(config) as judge:
        refs = await review(judge, references, concurrency)
        forged = await review(judge, forgeries, concurrency)
    print(f"judge {url}, {samples} sample(s), detection {'on' if detect else 'off'}")
    print(
        f"references: {len(references)}; false rejections {rate(refs['reference'], 'reject')}, "
        f"judge failures {refs['reference'].count('failed')}"
    )
    everything = [v for vs in forged.values() for v in vs]
    print(
        f"forgeries: {len(forgeries)}; caught {rate(everything, 'reject')}, judge failures {everything.count('failed')}"
    )
    for family, verdicts in sorted(forged.items()):
        print(f"  {family:<20} caught {rate(verdicts, 'reject')}")
    print(f"self-agreement of samples: {judge.judge_stats.as_dict()['judge/self_agreement']:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default=None, help="Model name (default: the server's first).")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--no-detect", action="store_true", help="Leave out the injection scan.")
    args = parser.parse_args()
    asyncio.run(main(args.judge, args.model, args.samples, args.concurrency, not args.no_detect))
