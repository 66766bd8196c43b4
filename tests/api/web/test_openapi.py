"""GET /api/openapi.json: a valid OpenAPI 3.1 document built from the routes the app has, every
one declared, the tokens as the route tables say, and each declared body's fields the very ones
its handler takes."""

from collections import defaultdict

import falcon
import orjson
import pytest
from falcon import testing
from openapi_spec_validator import validate

from tracker_api.admin.api_routes import ADMIN_ROUTES
from tracker_api.app import create_app
from tracker_api.warrior_api.warrior_routes import RequestResource
from tracker_api.web import openapi
from tracker_api.web.api_spec import declare, declared
from tracker_core.access import tokens
from tracker_core.admin import item_verbs, project_verbs

P = "proj"
NAMES = ["https://example.com/a b/?q=%20#frag", "https://example.com/x/y?page=2"]


@pytest.fixture
def document(web):
    answer = web.simulate_get("/api/openapi.json")  # anonymous
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    return orjson.loads(answer.content)


def _operations(document):
    return {
        (method.upper(), path): entry
        for path, item in document["paths"].items()
        for method, entry in item.items()
    }


def test_the_document_is_valid_openapi_3_1(document):
    validate(document)  # raises on any fault
    assert document["openapi"] == "3.1.0"


def test_every_route_is_declared(document):
    """A route added to ADMIN_ROUTES (or to the app) without @declare on its handler fails here:
    give it a declaration (tracker_api.web.api_spec) beside the handler."""
    undeclared = sorted(
        f"{m} {p}" for (m, p), entry in _operations(document).items() if entry.get("x-undeclared")
    )
    assert not undeclared, f"routes without a declaration: {undeclared}"
    missing = [f"{m} {p}" for m, p, _, handler in ADMIN_ROUTES if declared(handler) is None]
    assert not missing, f"admin handlers without @declare: {missing}"


def test_every_admin_route_is_there_with_its_token(document):
    operations = _operations(document)
    for method, path, needs, _ in ADMIN_ROUTES:
        entry = operations[(method, path)]
        assert entry["security"] == [{openapi.BEARER: []}], path
        assert entry["x-token"] == needs, path
        assert {"401", "403", "503"} <= set(entry["responses"]), path
        error = entry["responses"]["401"]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/AdminError"}
    assert document["components"]["schemas"]["AdminError"]["required"] == ["error"]


def test_the_warrior_protocol_is_there_anonymous_and_the_pages_are_not(document):
    operations = _operations(document)
    for path in ("/{project}/request", "/{project}/multi={multi}/request", "/{project}/done",
                 "/{project}/done+request", "/{project}/release", "/{project}/upload", "/{project}/uploaded",
                 "/backfeed/legacy/{name}", "/api/register.json", "/api/update.json"):  # fmt: skip
        assert operations[("POST", path)]["security"] == [], path
    for path in ("/{project}/items/{item}", "/{project}/stats.json", "/projects.json", "/api/openapi.json"):
        assert operations[("GET", path)]["security"] == [], path
    claim = operations[("POST", "/{project}/multi={multi}/request")]
    assert {"200", "403", "404", "429", "455"} <= set(claim["responses"])
    assert claim["parameters"][1] == {
        "name": "multi",
        "in": "path",
        "required": True,
        "schema": {"type": "integer"},
    }
    assert not [
        p for p in document["paths"] if p in ("/", "/{project}") or p.startswith(("/admin", "/static"))
    ]


def test_the_document_is_built_once(engine):
    app = create_app(engine)
    client = testing.TestClient(app)
    first = client.simulate_get("/api/openapi.json").content
    app.falcon_app.add_route("/added/later", object())  # routes never change while serving
    assert client.simulate_get("/api/openapi.json").content == first
    assert "/added/later" not in orjson.loads(first)["paths"]


def _closed_bodies():
    for method, path, _, handler in ADMIN_ROUTES:
        operation = declared(handler)
        if operation is not None and operation.fields is not None:
            yield pytest.param(method, path, operation.fields, id=f"{method} {path}")


@pytest.mark.parametrize("method,path,fields", _closed_bodies())
def test_a_declared_body_is_what_the_handler_takes(web, admin, method, path, fields):
    """The declaration's fields are the ones accepted: any other is refused, naming them."""
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, NAMES)
    token = tokens.create(admin.conn, "*")[0]
    concrete = path.format_map(defaultdict(lambda: "x1", project=P, queue="todo"))  # any other: a name
    answer = web.simulate_request(
        method,
        concrete,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        body=orjson.dumps({"zz_not_a_field": 1}),
    )
    assert answer.status_code == 400, answer.text
    assert answer.json["error"] == f"unknown field 'zz_not_a_field' (known: {', '.join(fields)})"


class _Undeclared:
    def on_get(self, req, resp):
        resp.media = {}


def test_a_route_without_a_declaration_still_appears(engine):
    """Generic, and marked: test_every_route_is_declared then names it."""
    app = create_app(engine)
    app.falcon_app.add_route("/api/admin/projects/{project}/new-thing", _Undeclared())
    entry = openapi.document(app.falcon_app)["paths"]["/api/admin/projects/{project}/new-thing"]["get"]
    assert entry["x-undeclared"] is True
    assert entry["parameters"][0]["name"] == "project"
    assert set(entry["responses"]) == {"404", "503"}
    validate(openapi.document(app.falcon_app))


def test_a_declaration_costs_a_call_nothing():
    """@declare sets an attribute and hands back the function itself: the warriors' hot path
    (warrior_api.hot_path) calls the very responder it called before."""

    def responder(req, resp):
        pass

    assert declare("x")(responder) is responder
    assert declared(RequestResource.on_post).summary == "Claim items"


def test_a_worker_sends_the_document_within_its_byte_budget(document):
    assert 50_000 < len(orjson.dumps(document)) < openapi.BYTES_PER_S / 20  # 40 a second or more

    def served(bytes_per_s: float) -> testing.TestClient:
        app = falcon.App()
        app.add_route(openapi.OPENAPI_PATH, openapi.OpenApiDocument(app, bytes_per_s=bytes_per_s))
        return testing.TestClient(app)

    size = len(served(openapi.BYTES_PER_S).simulate_get(openapi.OPENAPI_PATH).content)
    client = served(2.5 * size)  # two documents' worth and a half
    answers = [client.simulate_get(openapi.OPENAPI_PATH) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[2].headers["retry-after"] == "1" and "too often" in answers[2].text
