"""The ASGI application: one loaded model behind WebSocket streams, OpenAI REST and a caption page.

Routes: ``/`` (the live-caption page), ``/v1/stream`` (WebSocket, see ``server.stream``),
``POST /v1/audio/transcriptions``, ``POST /v1/audio/translations`` and ``GET /v1/models`` (OpenAI-compatible), ``/health``,
``/metrics`` (Prometheus). With an API key every route but ``/``, ``/health`` and the page's script
needs ``Authorization: Bearer KEY`` (a browser's WebSocket may pass ``?api_key=KEY`` instead).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from importlib import resources
from typing import Annotated

from fastapi import FastAPI, Form, Request, UploadFile, WebSocket
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from stenoflow.api import Model
from stenoflow.server.load import REFUSALS, Load
from stenoflow.server.metrics import Metrics
from stenoflow.server.options import ServerOptions
from stenoflow.server.rest import RequestError, TranscriptionRequest, transcribe_upload
from stenoflow.server.scheduler import ModelScheduler
from stenoflow.server.stream import CLOSE_BUSY, CLOSE_POLICY, StreamHandler

log = logging.getLogger(__name__)


def web_asset(name: str) -> str:
    return (resources.files("stenoflow") / "assets" / "web" / name).read_text(encoding="utf-8")


def create_app(model: Model, options: ServerOptions) -> FastAPI:
    metrics = Metrics()
    load = Load(options.target_latency_s)
    scheduler = ModelScheduler(metrics, model.whisper.decoder, options.batch)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        scheduler.close()

    app = FastAPI(title="stenoflow", lifespan=lifespan)

    def authorized(headers: Mapping[str, str], query_key: str | None = None) -> bool:
        if options.api_key is None:
            return True
        given = query_key
        auth = headers.get("authorization")
        if auth and auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        return given is not None and hmac.compare_digest(given.encode(), options.api_key.encode())

    @app.middleware("http")
    async def check_key(request: Request, call_next):  # type: ignore[no-untyped-def]
        if request.url.path not in ("/", "/health", "/capture-worklet.js") and not authorized(request.headers):
            metrics.error("unauthorized")
            return JSONResponse(RequestError("missing or wrong API key: send Authorization: Bearer KEY",
                                             401, code="invalid_api_key").body(), status_code=401)
        return await call_next(request)

    @app.exception_handler(RequestError)
    async def request_error(_: Request, e: RequestError) -> JSONResponse:
        metrics.error(e.code or f"http_{e.status}")
        return JSONResponse(e.body(), status_code=e.status)

    @app.get("/", response_class=HTMLResponse)
    async def page() -> str:
        return web_asset("index.html")

    @app.get("/capture-worklet.js")
    async def worklet() -> Response:
        return Response(web_asset("capture-worklet.js"), media_type="text/javascript")

    @app.get("/health")
    async def health() -> dict[str, object]:
        return {"status": "ok", "model": model.name, "sessions": metrics.sessions_active}

    @app.get("/metrics")
    async def prometheus() -> PlainTextResponse:
        passes = scheduler.batcher.stats if scheduler.batcher is not None else None
        text = metrics.render(passes) + "\n".join(load.render()) + "\n"
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models() -> dict[str, object]:
        return {"object": "list", "data": [{"id": model.name, "object": "model", "owned_by": "stenoflow",
                                            "created": 0}]}

    async def answer(req: TranscriptionRequest, file: UploadFile) -> Response:
        req.check(model.name)
        data = await file.read(options.max_upload_bytes + 1)
        if len(data) > options.max_upload_bytes:
            raise RequestError(f"the file is larger than the server's limit of {options.max_upload_bytes} bytes",
                               413, param="file", code="file_too_large")
        if not data:
            raise RequestError("the uploaded file is empty", param="file")
        body, media_type = await transcribe_upload(model, scheduler, metrics, data, req)
        return Response(body, media_type=media_type)

    @app.post("/v1/audio/transcriptions")
    async def transcriptions(
        file: UploadFile,
        model_name: Annotated[str, Form(alias="model")] = "whisper-1",
        language: Annotated[str | None, Form()] = None,
        prompt: Annotated[str | None, Form()] = None,
        temperature: Annotated[float, Form()] = 0.0,
        response_format: Annotated[str, Form()] = "json",
        granularities: Annotated[list[str] | None, Form(alias="timestamp_granularities[]")] = None,
    ) -> Response:
        return await answer(TranscriptionRequest(model_name, language or None, prompt or None, temperature,
                                                 response_format, tuple(granularities or ("segment",))), file)

    @app.post("/v1/audio/translations")
    async def translations(
        file: UploadFile,
        model_name: Annotated[str, Form(alias="model")] = "whisper-1",
        prompt: Annotated[str | None, Form()] = None,
        temperature: Annotated[float, Form()] = 0.0,
        response_format: Annotated[str, Form()] = "json",
    ) -> Response:
        """The speech of ``file``, in whatever language, as English text (OpenAI's translations)."""
        return await answer(TranscriptionRequest(model_name, None, prompt or None, temperature, response_format,
                                                 task="translate"), file)

    @app.middleware("http")
    async def limit_upload(request: Request, call_next):  # type: ignore[no-untyped-def]
        length = request.headers.get("content-length")
        if request.method == "POST" and length is not None and length.isdigit() \
                and int(length) > options.max_upload_bytes + 64 * 1024:
            metrics.error("file_too_large")
            return JSONResponse(RequestError(f"the request is larger than the server's limit of "
                                             f"{options.max_upload_bytes} bytes", 413, param="file",
                                             code="file_too_large").body(), status_code=413)
        return await call_next(request)

    @app.websocket("/v1/stream")
    async def stream(ws: WebSocket) -> None:
        await ws.accept()
        if not authorized(ws.headers, ws.query_params.get("api_key")):
            metrics.error("unauthorized")
            await ws.send_json({"type": "error", "code": "unauthorized",
                                "message": "missing or wrong API key: send Authorization: Bearer KEY or ?api_key="})
            await ws.close(CLOSE_POLICY, "unauthorized")
            return
        refusal = None
        if metrics.sessions_active >= options.max_sessions:
            refusal = f"the server has its limit of {options.max_sessions} streams open"
        elif options.admission == "auto" and (reason := load.admit()) is not None:
            refusal = REFUSALS[reason]
        if refusal is not None:
            metrics.error("busy")
            await ws.send_json({"type": "error", "code": "busy", "message": f"{refusal}: try again later"})
            await ws.close(CLOSE_BUSY, "busy")
            return
        with metrics.lock:
            metrics.sessions_active += 1
            metrics.sessions_total += 1
        stream_load = load.open()
        try:
            await StreamHandler(ws, model, scheduler, metrics, options, load, stream_load).run()
        except Exception:  # one stream's fault must not take the server down
            log.exception("stream failed")
            metrics.error("internal")
        finally:
            load.close(stream_load)
            with metrics.lock:
                metrics.sessions_active -= 1

    return app


def serve(model: Model, options: ServerOptions) -> None:
    """Run the server until interrupted (uvicorn, one process, one loaded model)."""
    import uvicorn

    app = create_app(model, options)
    log.info("serving %s on http://%s:%d (page at /, WebSocket at /v1/stream, REST at /v1/audio/transcriptions)",
             model.name, options.host, options.port)
    # The message limit is checked by the stream handler, so the client gets a clear error first.
    uvicorn.run(app, host=options.host, port=options.port, log_level="info",
                ws_max_size=max(options.max_message_bytes * 4, 16 * 1024 * 1024))
