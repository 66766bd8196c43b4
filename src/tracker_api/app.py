"""Wire the routes: ``create_app(engine)`` returns the WSGI application."""

from __future__ import annotations

from typing import Any

import falcon
import redis

from tracker_api.admin import api_routes, pages
from tracker_api.public import (
    front_page,
    health,
    metrics,
    public_cache,
    rendered_files,
    request_metrics,
    stats_json,
    stats_page,
)
from tracker_api.warrior_api import backfeed_route, hot_path, hq_routes, warrior_routes
from tracker_api.web import access_log, openapi
from tracker_api.web.config import AppConfig
from tracker_api.web.errors import (
    Refused,
    clock_handler,
    refuse_handler,
    script_handler,
    storage_handler,
    unrouted_handler,
)
from tracker_api.web.web_headers import SecurityHeaders
from tracker_core.admin.context import AdminContext
from tracker_core.infra.rawredis import RedisError
from tracker_core.infra.redis_clock import ClockRefused
from tracker_core.items.engine import Engine
from tracker_core.scripts import ScriptError

# The HTML pages, left out of the API's description (tracker_api.web.openapi.document).
PAGES = ("/", "/{project}", "/static/*", "/admin", "/admin/*")


def _collapse_slashes(app, hot: hot_path.HotPath, cache: public_cache.PublicCache | None = None):
    """Route /P/multi=K//request like /P/multi=K/request; let HOT answer the warriors' hot
    routes first (tracker_api.warrior_api.hot_path, which collapses them alike), APP everything else.

    Grab scripts build URLs as BASE + "/" + command with a BASE that already ends in "/"; the
    client turns a redirected POST into a GET and drops the body, so we must answer in place.
    """

    def wsgi(environ, start_response):
        if environ.get("REQUEST_METHOD") == "POST":
            answered = hot.answer(environ, start_response)
            if answered is not None:
                return answered
        path = environ.get("PATH_INFO")
        if path is None:
            # CONNECT host:port carries no path: route it as "/" (answered 405, counted), since
            # Falcon needs PATH_INFO and would fail with a 500.
            path = environ["PATH_INFO"] = "/"
        if "//" in path:
            environ["PATH_INFO"] = hot_path.collapsed(path)
        if cache is not None:
            # Anonymous aggregates come from the renderer's files (tracker_api.public.public_cache).
            answered = cache.answer(environ, start_response)
            if answered is not None:
                return answered
        return app(environ, start_response)

    # What the access log and the tests reach through the function (a callable object would
    # cost the hot path a bound call per request).
    wsgi.falcon_app = app  # type: ignore[attr-defined]
    wsgi.hot_path = hot  # type: ignore[attr-defined]
    return wsgi


def create_app(engine: Engine, admin: AdminContext | None = None, config: AppConfig = AppConfig()):
    """The tracker's WSGI app over ENGINE (the hot path), ADMIN (redis-py, for the admin faces,
    the HQ and the front page; built from engine.redis_url when None; each admin request acts
    as its token through ``admin.as_actor``) and CONFIG (what the CLI was given)."""
    # Per-route request counts and durations, every bjoern worker's (tracker_api.public.request_metrics).
    requests_seen = request_metrics.RequestMetrics(request_metrics.multiprocess_directory())
    cache = None
    if config.public_cache_dir is not None:
        store = rendered_files.Store(config.public_cache_dir)
        cache = public_cache.PublicCache(
            store, engine, requests_seen, config.public_cache_max_age_s, config.public_url
        )
    app = create_routes(engine, admin, config, requests_seen, cache)
    # The warriors' hot routes skip Falcon's request machinery (tracker_api.warrior_api.hot_path). The
    # access log is outermost, so that its line times everything done for the request.
    hot = hot_path.HotPath(app, requests_seen)
    return access_log.wrap(_collapse_slashes(app, hot, cache), config.trust_forwarded)


def create_routes(
    engine: Engine,
    admin: AdminContext | None = None,
    config: AppConfig = AppConfig(),
    requests_seen: request_metrics.RequestMetrics | None = None,
    cache: public_cache.PublicCache | None = None,
) -> falcon.App:
    """The Falcon app with every route: what create_app serves behind the hot path and CACHE,
    and what the renderer (tracker_api.public.public_renderer) renders through. REQUESTS_SEEN counts the
    responses (one over the workers' multiprocess directory when None)."""
    if admin is None:
        admin = AdminContext.from_url(engine.redis_url)
    if requests_seen is None:
        requests_seen = request_metrics.RequestMetrics(request_metrics.multiprocess_directory())
    middleware: list[Any] = [requests_seen, SecurityHeaders()]
    app = falcon.App(media_type=falcon.MEDIA_JSON, middleware=middleware)
    app.req_options.strip_url_path_trailing_slash = True
    app.add_error_handler(RedisError, storage_handler)
    app.add_error_handler(ScriptError, script_handler)
    app.add_error_handler(ClockRefused, clock_handler)
    # Admin paths (redis-py): unreachable, timed out or refused: 503 in each face's shape
    # (errors.answer). The verbs' typed refusals are mapped by the faces (errors.admin_refusal).
    app.add_error_handler(redis.exceptions.RedisError, storage_handler)
    app.add_error_handler(Refused, refuse_handler(engine))
    app.add_error_handler(falcon.HTTPRouteNotFound, unrouted_handler(engine))
    app.add_error_handler(falcon.HTTPMethodNotAllowed, unrouted_handler(engine))

    def protocol(resource_cls):
        return resource_cls(engine, trust_forwarded=config.trust_forwarded)

    request = protocol(warrior_routes.RequestResource)
    done = protocol(warrior_routes.DoneResource)
    done_request = protocol(warrior_routes.DoneRequestResource)
    app.add_route("/{project}/request", request)
    app.add_route("/{project}/multi={multi:int}/request", request)
    app.add_route("/{project}/done", done)
    app.add_route("/{project}/multi={multi:int}/done", done)
    app.add_route("/{project}/done+request", done_request)
    app.add_route("/{project}/multi={multi:int}/done+request", done_request)
    app.add_route("/{project}/release", protocol(warrior_routes.ReleaseResource))
    app.add_route("/{project}/upload", protocol(warrior_routes.UploadResource))
    app.add_route("/{project}/uploaded", protocol(warrior_routes.UploadedResource))
    # {item:path}: a name may hold "/" (URL items); the resource strips the ".json" suffix.
    app.add_route("/{project}/items/{item:path}", protocol(warrior_routes.ItemStatusResource))
    app.add_route("/{project}/stats.json", stats_json.StatsResource(engine))
    app.add_route("/backfeed/legacy/{name}", backfeed_route.BackfeedResource(engine))
    app.add_route("/static/{name}", stats_page.StaticResource())
    app.add_route(
        "/metrics", metrics.MetricsResource(engine, admin.conn, config.metrics_token, requests_seen)
    )
    api_routes.add_admin_routes(app, admin, config)
    pages.add_admin_pages(app, admin, config.segments_dir)
    hq_routes.add_hq_routes(app, admin.conn, config, cache)
    app.add_route("/healthz", health.HealthCheck(engine))
    app.add_route("/", front_page.FrontPage(engine, admin.conn))
    app.add_route("/{project}", stats_page.LeaderboardPage(engine, config.live_url))
    app.add_route(openapi.OPENAPI_PATH, openapi.OpenApiDocument(app, PAGES))
    return app
