"""The dashboard's web app: the page (``static/``), its JSON API, and ``/metrics`` for Prometheus.

Every ``REFRESH_S`` seconds (in the background while the server runs, and on a request that finds
the figures older than that) it reads what the runs wrote since, scrapes the sandbox services, and
evaluates the alert rules. Off loopback every request needs the token (``Authorization: Bearer``,
or ``?token=`` on the page's own address, which the page then sends as the header).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import math
import time
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

from dojo.dashboard.alerts import DEFAULT_RULES, AlertEngine, AlertRule
from dojo.dashboard.fleet import ServiceWatch, scrape_all
from dojo.dashboard.runs import RunLocation, RunView
from dojo.rewards.agreement import AgreementMonitor

REFRESH_S = 2.0  # a live run's new points reach the page within this plus the page's own poll (2 s)
NODE_FIGURES = ("queue_depth", "error_rate", "unreachable", "p99_seconds")  # what node rules look at
PROMETHEUS_WINDOW = 20  # groups: the window of /metrics' recent rates (the default rules' window)
STATIC = Path(str(resources.files("dojo.dashboard") / "static"))
log = logging.getLogger(__name__)


class Dashboard:
    """What the page shows: the runs, the sandbox services, the judge's review set, the alerts."""

    def __init__(
        self,
        runs: list[RunLocation],
        *,
        services: list[str] | None = None,
        service_token: str | None = None,
        rules: list[AlertRule] | None = None,
        webhook: str | None = None,
        review: Path | None = None,
    ) -> None:
        self.runs = [RunView(r) for r in runs]
        self.services = [ServiceWatch(url, service_token) for url in services or []]
        self.engine = AlertEngine(list(DEFAULT_RULES if rules is None else rules), webhook)
        self.review = AgreementMonitor(review) if review is not None else None
        self.review_figures: dict[str, float] = {}
        self.refreshed_at = 0.0
        self._lock = asyncio.Lock()

    def refresh(self) -> None:
        """Read, scrape, evaluate: blocking (the server calls it in a worker thread)."""
        for run in self.runs:
            run.refresh()
        if self.services:
            asyncio.run(scrape_all(self.services))  # (this runs in a worker thread: no loop of its own)
        if self.review is not None:
            self.review_figures = self.review.check()
        values: dict[str, dict[str, float | None]] = {}
        groups: dict[str, float] = {}
        for run in self.runs:
            windows = {n: run.window(n) for n in {r.window_groups for r in self.engine.rules if not r.on_nodes}}
            metrics: dict[str, float | None] = {}
            for rule in self.engine.rules:
                if not rule.on_nodes and rule.metric != "judge_agreement":
                    metrics[rule.metric] = _run_metric(windows[rule.window_groups], rule.metric)
            metrics["judge_agreement"] = _last(run.train_rows, "judge/agreement")
            values[f"run {run.name}"] = metrics
            groups[f"run {run.name}"] = float(len(set(run.episodes.group_id.tolist())))
        if self.review is not None:
            subject = f"review {self.review.review_dir}"
            agreement = self.review_figures.get("judge/agreement")
            enough = self.review_figures.get("judge/agreement_items", 0.0) >= self.review.min_items
            values[subject] = {"judge_agreement": agreement if enough else None}
            groups[subject] = math.inf
        for service in self.services:
            figures = service.figures()
            values[f"node {service.url}"] = {k: figures.get(k) for k in NODE_FIGURES}
            for node in figures.get("nodes", []):  # a fleet's own nodes, behind its gateway
                subject = f"node {node['node']} ({service.url})"
                values[subject] = {k: node.get(k) for k in ("queue_depth", "unreachable")}
        self.engine.post(self.engine.evaluate(values, groups))
        self.refreshed_at = time.time()

    async def refreshed(self, max_age: float = REFRESH_S) -> None:
        async with self._lock:
            if time.time() - self.refreshed_at >= max_age:
                await asyncio.to_thread(self.refresh)

    def run(self, index: int) -> RunView:
        if not 0 <= index < len(self.runs):
            raise HTTPException(404, f"no run {index}: the dashboard shows runs 0 to {len(self.runs) - 1}")
        return self.runs[index]

    def overview(self) -> dict[str, Any]:
        return {
            "runs": [run.summary() for run in self.runs],
            "services": [s.figures() for s in self.services],
            "review": self.review_figures or None,
            "alerts": self.engine.state(),
            "refreshed_at": self.refreshed_at,
            "refresh_seconds": REFRESH_S,
        }

    def prometheus(self) -> str:
        """The runs' figures and the firing alerts in Prometheus's text format: what
        deploy/grafana/dojo.json draws and deploy/prometheus/dojo-alerts.yml alerts on."""
        gauges = {
            "dojo_run_episodes": "Episodes the run has written",
            "dojo_run_groups": "Groups the run has written",
            "dojo_run_mean_reward": "Mean reward of the run's scored episodes",
            "dojo_run_pass_rate": "Share of the run's scored episodes that passed",
            "dojo_run_hack_rate": "Share of the run's scored episodes flagged as hacks",
            "dojo_run_infra_failure_rate": "Share of the run's episodes lost to infrastructure failures",
            "dojo_run_recent_hack_rate": f"Hack rate over the run's last {PROMETHEUS_WINDOW} groups",
            "dojo_run_recent_infra_failure_rate": f"Infra failure rate over the last {PROMETHEUS_WINDOW} groups",
            "dojo_run_recent_pass_rate": f"Pass rate over the run's last {PROMETHEUS_WINDOW} groups",
            "dojo_run_recent_throughput": f"Episodes per second over the run's last {PROMETHEUS_WINDOW} groups",
            "dojo_run_throughput": "Episodes per second over the whole run",
            "dojo_run_judge_agreement": "The judge's agreement with people (metrics.csv's judge/agreement)",
        }
        values: dict[str, list[tuple[str, float | None]]] = {name: [] for name in gauges}
        for run in self.runs:
            s, w = run.summary(), run.window(PROMETHEUS_WINDOW)
            for name, value in (
                ("dojo_run_episodes", s["episodes"]), ("dojo_run_groups", s["groups"]),
                ("dojo_run_mean_reward", s["mean_reward"]), ("dojo_run_pass_rate", s["pass_rate"]),
                ("dojo_run_hack_rate", s["hack_rate"]), ("dojo_run_infra_failure_rate", s["infra_failure_rate"]),
                ("dojo_run_recent_hack_rate", w.get("hack_rate")),
                ("dojo_run_recent_infra_failure_rate", w.get("infra_failure_rate")),
                ("dojo_run_recent_pass_rate", w.get("pass_rate")), ("dojo_run_recent_throughput", w.get("throughput")),
                ("dojo_run_throughput", w.get("throughput_overall")),
                ("dojo_run_judge_agreement", _last(run.train_rows, "judge/agreement")),
            ):  # fmt: skip
                values[name].append((run.name, value))
        lines = []
        for name, text in gauges.items():
            lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
            lines += [f'{name}{{run="{_label(run)}"}} {float(v):g}' for run, v in values[name] if v is not None]
        lines += ["# HELP dojo_dashboard_alerts_firing Alerts firing now", "# TYPE dojo_dashboard_alerts_firing gauge",
                  f"dojo_dashboard_alerts_firing {len(self.engine.firing)}"]  # fmt: skip
        return "\n".join(lines) + "\n"


def _run_metric(window: dict[str, float | None], metric: str) -> float | None:
    if metric == "throughput_drop":
        now, overall = window.get("throughput"), window.get("throughput_overall")
        return 1.0 - now / overall if now is not None and overall else None
    return window.get(metric)


def _last(rows: list[dict[str, float | None]], column: str) -> float | None:
    for row in reversed(rows):
        if row.get(column) is not None:
            return row[column]
    return None


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def create_dashboard_app(dashboard: Dashboard, token: str | None = None) -> FastAPI:
    """The dashboard's app; ``token``: required of every request (off loopback)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async def keep_fresh() -> None:
            while True:  # (one refresh that raised had ended it for good: alerts were no longer evaluated)
                try:
                    await dashboard.refreshed()
                except Exception:
                    log.exception("the dashboard's refresh failed; trying again in %.1f s", REFRESH_S)
                await asyncio.sleep(REFRESH_S / 2)

        task = asyncio.create_task(keep_fresh())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = FastAPI(title="dojo dashboard", lifespan=lifespan)

    @app.middleware("http")
    async def require_token(request: Request, call_next: Any) -> Response:
        if token is not None:
            scheme, _, value = request.headers.get("authorization", "").partition(" ")
            given = value.strip() if scheme.lower() == "bearer" else request.query_params.get("token", "")
            if not hmac.compare_digest(given.encode(), token.encode()):
                return JSONResponse(
                    {"error": "missing or wrong token: open the page as /?token=<token>, or send "
                              "'Authorization: Bearer <token>'"}, status_code=401,
                )  # fmt: skip
        response: Response = await call_next(request)
        return response

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/api/overview")
    async def overview() -> dict[str, Any]:
        await dashboard.refreshed()
        return dashboard.overview()

    @app.get("/api/runs/{index}/curves")
    async def curves(index: int) -> dict[str, Any]:
        await dashboard.refreshed()
        return dashboard.run(index).curves()

    @app.get("/api/runs/{index}/slowest")
    async def slowest(index: int, n: int = Query(20, ge=1, le=500)) -> dict[str, Any]:
        await dashboard.refreshed()
        return dashboard.run(index).slowest(n)

    @app.get("/api/runs/{index}/episodes")
    async def episodes(
        index: int,
        task: str = Query("", max_length=200, description="Part of the task id."),
        verdict: str = Query("", max_length=50, description="The verdict, exactly (pass, fail, hack, ...)."),
        flag: str = Query("", max_length=200, description="Part of a reward flag (e.g. hack:)."),
        status: str = Query("", max_length=50, description="The episode's status, exactly."),
        limit: int = Query(100, ge=1, le=1000),
    ) -> list[dict[str, Any]]:
        await dashboard.refreshed()
        return dashboard.run(index).search(task=task, verdict=verdict, flag=flag, status=status, limit=limit)

    @app.get("/api/runs/{index}/episodes/{episode_id:path}")  # (ids hold '/': step000001/HumanEval/0#3)
    async def episode(index: int, episode_id: str) -> dict[str, Any]:
        found = await asyncio.to_thread(dashboard.run(index).episode, episode_id)
        if found is None:
            raise HTTPException(404, f"no episode {episode_id!r} in run {index} (yet)")
        return found

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> PlainTextResponse:
        await dashboard.refreshed()
        return PlainTextResponse(dashboard.prometheus(), media_type="text/plain; version=0.0.4")

    return app
