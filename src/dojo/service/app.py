"""The FastAPI application: routes, admission, auth, request ids, body limits, errors."""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dojo.errors import DojoError, InputError
from dojo.rewards.harness import call_function
from dojo.sandbox import AsyncSandbox, ExecutionResult, Limits, Program, SandboxAPI, SandboxError, Verdict
from dojo.service import fusion, jupyter
from dojo.service.admission import AdmissionQueue, Overloaded
from dojo.service.answers import answer_bytes, answer_response
from dojo.service.batch import run_batch
from dojo.service.logs import ACCESS_LOGGER
from dojo.service.metrics import ServiceMetrics
from dojo.service.schemas import BatchCase, BatchItem, BatchRequest, BatchResponse, RunRequest
from dojo.service.sessions import SessionLimitReached, SessionManager, register_session_routes
from dojo.tasks.values import decode_value, returned_equal

log = logging.getLogger(ACCESS_LOGGER)
REQUEST_ID_HEADER = "X-Request-ID"


@dataclass(frozen=True)
class ServiceSettings:
    """How the service runs. Defaults suit one machine; every field is a `dojo serve` option."""

    pool_size: int | None = None
    queue: int = 256
    token: str | None = None
    max_body_bytes: int = 32 << 20
    max_sessions: int = 1000
    session_ttl: float = 600.0
    max_wall_time: float = 300.0
    allow_network: bool = False  # requests may set network "host"
    network_allow: tuple[str, ...] = ()  # destinations requests may list under network "allow"
    retry_after: float = 1.0
    # The most bytes one answer may hold (a request whose limits allow more is refused; a batch stops
    # there), and those of all the answers in the making (past it, 429): see dojo.service.admission.
    max_answer_bytes: int = 512 << 20
    max_pending_answer_bytes: int | None = None  # None: a quarter of the machine's memory
    max_batch_seconds: float = 1800.0  # a batch's cases left after this long are skipped
    # The Python environment of /run_code's Python and pytest runs whose request names none
    # (SandboxFusion's packages: `make fusion-env`); None: the sandbox's bare interpreter.
    fusion_environment: str | None = None

    def __post_init__(self) -> None:
        if self.token is not None and not (self.token.isascii() and self.token.isprintable() and " " not in self.token):
            raise InputError("the token must be printable ASCII without spaces (a bearer token is sent in a header)")
        pending = self.pending_answer_bytes
        if self.max_answer_bytes < 1 << 20 or pending < self.max_answer_bytes:
            raise InputError(f"max_answer_bytes must be at least 1 MiB and at most max_pending_answer_bytes, {pending}")
        if self.max_batch_seconds <= 0:
            raise InputError("max_batch_seconds must be positive")

    @property
    def pending_answer_bytes(self) -> int:
        if self.max_pending_answer_bytes is not None:
            return self.max_pending_answer_bytes
        return max(self.max_answer_bytes, memory_bytes() // 4)


def memory_bytes() -> int:
    """This service's memory: the machine's, or its cgroup's limit where that is lower (a container)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:  # cgroup v2: the line "0::/its/group" of /proc/self/cgroup
        group = Path("/proc/self/cgroup").read_text().partition("0::")[2].splitlines()[0].strip("/")
        limit = (Path("/sys/fs/cgroup") / group / "memory.max").read_text().strip()
    except (OSError, IndexError):
        return memory
    return min(memory, int(limit)) if limit.isdigit() else memory


class RequestContext:
    """Pure ASGI middleware (cheaper than BaseHTTPMiddleware): request id, bearer auth, body size
    limit, one JSON log line and latency metrics per request."""

    def __init__(self, app: ASGIApp, settings: ServiceSettings, metrics: ServiceMetrics) -> None:
        self.app = app
        self.settings = settings
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        headers = dict(scope.get("headers", []))
        rid = (headers.get(b"x-request-id", b"").decode("latin-1") or uuid.uuid4().hex)[:128]
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        status = 500
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (REQUEST_ID_HEADER.lower().encode(), rid.encode())]
            await send(message)

        try:
            if self.settings.token and scope["path"] != "/healthz" and not _authorized(headers, self.settings.token):
                await JSONResponse(
                    {"error": "missing or wrong bearer token: send 'Authorization: Bearer <token>'", "request_id": rid},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )(scope, receive, send_with_id)
                return
            length = headers.get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.settings.max_body_bytes:
                await self._too_large(scope, receive, send_with_id, rid)
                return
            received = 0

            async def limited() -> Message:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > self.settings.max_body_bytes:
                        raise BodyTooLarge
                return message

            try:
                await self.app(scope, limited, send_with_id)
            except BodyTooLarge:
                await self._too_large(scope, receive, send_with_id, rid)
            except Exception as exc:
                # Anything else is the service's own failure, never the caller's: 500, logged. Answered
                # here, not re-raised (Starlette's last handler re-raises, and uvicorn then dropped the
                # keep-alive connection: 13 of 20 requests sent on it next were lost).
                if started:
                    raise
                log.exception("internal error on %s %s", scope.get("method"), scope.get("path"), exc_info=exc)
                message = f"internal error ({type(exc).__name__}); the request id is in the log"
                await JSONResponse({"error": message, "request_id": rid}, status_code=500)(scope, receive, send_with_id)
        finally:
            for release in state.pop("releases", ()):  # what the request held, once its answer is sent
                release()
            elapsed = time.perf_counter() - start
            route = scope.get("route")
            self.metrics.latency.labels(endpoint=getattr(route, "path", "unmatched")).observe(elapsed)
            fields: dict[str, Any] = {
                "request_id": rid,
                "method": scope.get("method"),
                "path": scope.get("path"),
                "status": status,
                "duration_ms": round(elapsed * 1000, 2),
            }
            if state.get("verdict"):
                fields["verdict"] = state["verdict"]
            log.info("request", extra={"fields": fields})

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, rid: str) -> None:
        limit = self.settings.max_body_bytes
        await JSONResponse(
            {
                "error": f"request body larger than {limit} bytes; send less or raise --max-body-bytes",
                "request_id": rid,
            },
            status_code=413,
        )(scope, receive, send)


class BodyTooLarge(DojoError):
    pass


def create_app(
    settings: ServiceSettings | None = None, sandbox: SandboxAPI | None = None, close_sandbox: bool = False
) -> FastAPI:
    """Build the app. It starts (and owns) an ``AsyncSandbox`` unless one is given (a
    ``dojo.cluster.SandboxFleet`` makes it a gateway to a whole Ray cluster); a given one is closed
    at shutdown too with ``close_sandbox``."""
    settings = settings or ServiceSettings()
    metrics = ServiceMetrics()
    owned = sandbox is None or close_sandbox
    sb: SandboxAPI = sandbox or AsyncSandbox(pool_size=settings.pool_size)
    admission = AdmissionQueue(sb.pool_size, settings.queue, settings.retry_after, settings.pending_answer_bytes)
    sessions = SessionManager(sb, max_sessions=settings.max_sessions, ttl=settings.session_ttl)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await sb.start()
        try:
            if settings.fusion_environment:  # its slots start now (their imports done), not on the first request
                await fusion.warm(sb, settings.fusion_environment)
        except BaseException:
            if owned:
                await sb.close()
            raise
        admission.resize(sb.pool_size)  # a fleet knows its slots once it has met its nodes

        async def follow_slots() -> None:  # and they change as nodes join, die or drain
            while True:
                await asyncio.sleep(2.0)
                admission.resize(sb.pool_size)

        follower = asyncio.create_task(follow_slots())
        await sessions.start()
        try:
            yield
        finally:
            follower.cancel()
            await sessions.close()
            if owned:
                await sb.close()

    app = FastAPI(
        title="dojo sandbox service",
        version="0.1.0",
        description="Isolated execution of model-written code: native API (/v1) and SandboxFusion's /run_code.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.sandbox = sb
    app.state.metrics = metrics
    app.state.admission = admission
    app.state.sessions = sessions

    def error(request: Request, message: str, status: int, headers: dict[str, str] | None = None) -> JSONResponse:
        body = {"error": message, "request_id": getattr(request.state, "request_id", None)}
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(Overloaded)
    async def overloaded(request: Request, exc: Overloaded) -> JSONResponse:
        metrics.rejected.labels(reason="queue_full").inc()
        return error(request, str(exc), 429, {"Retry-After": str(max(1, round(exc.retry_after)))})

    @app.exception_handler(SessionLimitReached)
    async def too_many_sessions(request: Request, exc: SessionLimitReached) -> JSONResponse:
        metrics.rejected.labels(reason="sessions").inc()
        return error(request, str(exc), 429, {"Retry-After": str(max(1, round(settings.retry_after)))})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(request, str(exc.detail), exc.status_code, getattr(exc, "headers", None))

    @app.exception_handler(InputError)
    async def bad_input(request: Request, exc: InputError) -> JSONResponse:
        return error(request, str(exc), 400)

    @app.exception_handler(ValidationError)
    async def bad_value(request: Request, exc: ValidationError) -> JSONResponse:
        """A model built from the request's data inside a handler (e.g. SandboxFusion's limits)."""
        summary = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        return error(request, f"invalid request: {summary}", 422)

    @app.exception_handler(SandboxError)
    async def sandbox_failed(request: Request, exc: SandboxError) -> JSONResponse:
        """The sandbox failed under the request (a slot died as it started, a session's slot died):
        the infrastructure's failure, never the program's: 503, and the client may retry."""
        log.warning("sandbox error on %s %s: %s", request.method, request.url.path, exc)
        retry = {"Retry-After": str(max(1, round(settings.retry_after)))}
        return error(request, f"the sandbox failed: {exc}", 503, retry)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", [])), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()
        ]
        summary = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in errors[:5])
        return JSONResponse(
            {"error": f"invalid request: {summary}", "detail": errors, "request_id": request.state.request_id},
            status_code=422,
        )

    def check_limits(*limits: Limits | None) -> None:
        for lim in limits:
            if lim is not None and lim.wall_time > settings.max_wall_time:
                raise InputError(f"wall_time {lim.wall_time}s is over this service's maximum {settings.max_wall_time}s")
            if lim is not None and lim.network.mode == "host" and not settings.allow_network:
                raise InputError(
                    "this service does not let programs reach the host's network; start it with --allow-network"
                )
            if lim is not None and lim.network.mode == "allow":
                outside = [e for e in lim.network.allow if e not in settings.network_allow]
                if outside:
                    raise InputError(
                        f"this service does not let programs reach {', '.join(outside)}; the operator lists what "
                        "runs may reach with dojo serve --network-allow ENTRY"
                    )

    def admitted(request: Request, weight: int = 1, answer: int = 0) -> None:
        """Hold ``weight`` places and ``answer`` bytes of answers until the answer is sent (the
        middleware gives them back): given back as the handler returned, an answer that its client
        did not read sat in the server's buffers uncounted (24 of 12 MB: 420 MB against a bound of 64)."""
        request.state.releases = [*getattr(request.state, "releases", ()), admission.enter(weight, answer)]

    def answer_size(program: Program, limits: Limits, compile_limits: Limits | None) -> int:
        """What the run's result may take in the answer; an ``InputError`` past ``max_answer_bytes``."""
        size = answer_bytes(limits, compile_limits, program.fetch)
        if size > settings.max_answer_bytes:
            raise InputError(
                f"a result under these limits may take {size} bytes in the answer (stdout and stderr at limits.output "
                f"each, every byte a control character: 6 bytes in JSON; {len(program.fetch)} fetched files at "
                f"limits.file_size in base64); this service answers at most {settings.max_answer_bytes} bytes: lower "
                "limits.output or limits.file_size, or fetch fewer files (dojo serve --max-answer-bytes raises it)"
            )
        return size

    async def run_one(
        program: Program, limits: Limits, compile_limits: Limits | None, isolation: str = "fast"
    ) -> ExecutionResult:
        result = await sb.run(program, limits, compile_limits=compile_limits, isolation=isolation)  # type: ignore[arg-type]
        metrics.runs.labels(verdict=str(result.verdict), language=result.language or program.language).inc()
        return result

    def call_values(case: BatchCase) -> Any:
        """Check a function-call case's wire values; the expected return value, decoded."""
        assert case.call is not None
        try:
            decode_value(case.call.args)
            decode_value(case.call.kwargs)
            return decode_value(case.expected_return)
        except (ValueError, TypeError) as e:
            raise InputError(f"a call's args, kwargs and expected_return must be dojo wire values: {e}") from e

    async def call_one(program: Program, limits: Limits, case: BatchCase) -> tuple[ExecutionResult, Any]:
        """A function-call case, through the grading harness: the candidate's process returns its
        value as exact-type data; the expected value (if any) is compared here, as data."""
        expected = call_values(case)
        assert case.call is not None
        outcome = await call_function(sb, program, case.call.function, case.call.args, case.call.kwargs, limits)
        result = outcome.result
        judged = outcome.returned and "expected_return" in case.model_fields_set
        if judged and not returned_equal(outcome.value, expected, case.tolerance):
            result = result.model_copy(update={"verdict": Verdict.WRONG_ANSWER})
        metrics.runs.labels(verdict=str(result.verdict), language="python").inc()
        return result, outcome.value

    def fleet_nodes() -> dict[str, int] | None:
        """Nodes by state (ready, drained, dead, ...) when the sandbox is a fleet; else None."""
        stats = getattr(sb, "stats", None)
        if stats is None:
            return None
        counts: dict[str, int] = {}
        for node in stats().values():
            state = "drained" if node["state"] == "ready" and node["drained"] else node["state"]
            counts[state] = counts.get(state, 0) + 1
        return counts

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, Any]:
        """Liveness and load: slots, admitted requests, live sessions (and a fleet's nodes)."""
        body: dict[str, Any] = {
            "status": "ok",
            "slots": sb.pool_size,
            "admitted": admission.admitted,
            "capacity": admission.capacity,
            "live_sessions": sessions.live,
        }
        nodes = fleet_nodes()
        if nodes is not None:
            body["nodes"] = nodes
        return body

    @app.get("/metrics", tags=["service"])
    async def prometheus_metrics() -> Response:
        """Prometheus metrics: runs by verdict and language, latency, queue, sessions, restarts."""
        metrics.queue_depth.set(admission.waiting)
        metrics.admitted.set(admission.admitted)
        metrics.live_sessions.set(sessions.live)
        metrics.slot_restarts.set(sb.pool.restarts if isinstance(sb, AsyncSandbox) and sb.started else 0)
        nodes = fleet_nodes()
        if nodes is not None:
            for state in ("starting", "ready", "drained", "dead", "unusable"):
                metrics.fleet_nodes.labels(state=state).set(nodes.get(state, 0))
            metrics.fleet_slots.set(sb.pool_size)
            metrics.fleet_reruns.set(getattr(sb, "reruns", 0))
            per_node = (metrics.node_state, metrics.node_slots, metrics.node_outstanding, metrics.node_runs)
            for gauge in per_node:
                gauge.clear()  # (a node that left is no row)
            for node_id, node in sb.stats().items():  # type: ignore[attr-defined]
                labels = {"node": str(node_id), "address": str(node.get("address") or "")}
                state = "drained" if node["state"] == "ready" and node["drained"] else node["state"]
                for each in ("starting", "ready", "drained", "dead", "unusable"):
                    metrics.node_state.labels(**labels, state=each).set(1.0 if state == each else 0.0)
                metrics.node_slots.labels(**labels).set(node.get("slots") or 0)
                metrics.node_outstanding.labels(**labels).set(node.get("outstanding") or 0)
                metrics.node_runs.labels(**labels).set(node.get("runs") or 0)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/run", response_model=ExecutionResult, tags=["native"])
    async def run(body: RunRequest, request: Request) -> Response:
        """Run one program with limits; the result carries the verdict."""
        check_limits(body.limits, body.compile_limits)
        admitted(request, answer=answer_size(body.program, body.limits, body.compile_limits))
        result = await run_one(body.program, body.limits, body.compile_limits, body.isolation)
        request.state.verdict = str(result.verdict)
        return json_response(result)

    @app.post("/v1/batch", response_model=BatchResponse, tags=["native"])
    async def batch(body: BatchRequest, request: Request) -> Response:
        """One program against N cases, or N programs; results in order (``dojo.service.batch``)."""
        check_limits(body.limits, body.compile_limits, *(c.limits for c in body.cases))
        jobs: list[tuple[Program, Limits, BatchCase | None]] = []
        if body.program is not None:
            for case in body.cases:
                program = body.program.model_copy(
                    update={"stdin": case.stdin, "expected_stdout": case.expected_stdout, "args": case.args}
                )
                jobs.append((program, case.limits or body.limits, case if case.call is not None else None))
        else:
            jobs = [(p, body.limits, None) for p in body.programs]
        for called in (c for c in body.cases if c.call is not None):
            call_values(called)  # every case's values checked before any runs
        answer = min(sum(answer_size(p, lim, body.compile_limits) for p, lim, _ in jobs), settings.max_answer_bytes)

        async def run_job(i: int) -> tuple[BatchItem, bool]:
            program, limits, case = jobs[i]
            value = None
            if case is not None:
                result, value = await call_one(program, limits, case)
            else:
                result = await run_one(program, limits, body.compile_limits)
            return BatchItem(index=i, result=result, return_value=value), result.verdict is Verdict.ACCEPTED

        # in order when stopping at the first failure, so that "first" means first
        width = 1 if body.stop_on_first_failure else min(len(jobs), sb.pool_size)
        admitted(request, weight=width, answer=answer)
        answered = await run_batch(jobs, run_job, width=width, stop_on_first_failure=body.stop_on_first_failure,
                                   request=request, max_answer_bytes=settings.max_answer_bytes,
                                   max_seconds=settings.max_batch_seconds)  # fmt: skip
        return answer_response(answered)

    @app.post("/run_code", response_model=fusion.RunCodeResponse, tags=["sandboxfusion"])
    async def run_code(body: fusion.RunCodeRequest, request: Request) -> Response:
        """SandboxFusion-compatible: the same request and response fields and status strings."""
        program, limits, compile_limits = fusion.to_program(body, settings.fusion_environment)
        check_limits(limits, compile_limits)
        admitted(request, answer=answer_size(program, limits, compile_limits))
        result = await run_one(program, limits, compile_limits)
        request.state.verdict = str(result.verdict)
        return json_response(fusion.to_response(result))

    @app.post("/run_jupyter", response_model=jupyter.RunJupyterResponse, tags=["sandboxfusion"])
    async def run_jupyter(body: jupyter.RunJupyterRequest, request: Request) -> Response:
        """SandboxFusion-compatible: cells run in order in a Jupyter kernel of the fusion environment."""
        program, limits = jupyter.to_program(body, settings.fusion_environment)
        check_limits(limits)
        admitted(request, answer=answer_size(program, limits, None))
        result = await run_one(program, limits, None)
        request.state.verdict = str(result.verdict)
        return json_response(jupyter.to_response(result))

    def session_answer(request: Request, limits: Limits) -> None:  # (a session runs on its own slot: no place)
        admitted(request, weight=0, answer=answer_size(Program(language="bash", source=""), limits, None))

    register_session_routes(app, sessions, session_answer, check_limits)
    app.add_middleware(RequestContext, settings=settings, metrics=metrics)
    return app


def json_response(model: BaseModel) -> Response:
    """Serialise with pydantic directly (FastAPI's response_model path re-validates: slower)."""
    return answer_response(model.model_dump_json().encode())


def _authorized(headers: dict[bytes, bytes], token: str) -> bool:
    scheme, _, value = headers.get(b"authorization", b"").partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), token.encode())
