"""The leaderboard page's project details: description, repository and logo settings (http(s)
URLs only), rendered escaped, and the one logo origin the page's CSP admits."""

import orjson
import pytest
from falcon import testing

from tracker_api.app import create_app
from tracker_core.access import tokens
from tracker_core.admin import project_verbs
from tracker_core.admin.errors import AdminError
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.project import project_links

P = "pagetest"
REPO = "https://git.example.org/grab/pagetest?tab=readme&x=%20y#top"
LOGO = "https://img.example.net:8443/logos/page test.png".replace(" ", "%20")


@pytest.fixture
def web(redis_url):
    """A client whose every request goes to an app with a new engine, so a settings change is
    seen at once (a running engine caches settings for a while)."""

    class Fresh:
        def __getattr__(self, name):
            return getattr(testing.TestClient(create_app(Engine(redis_url))), name)

    return Fresh()


@pytest.fixture
def project(admin):
    project_verbs.create(
        admin, P, {"title": "{{about}} & <i>co</i>", "description": "Line one\n<script>x()</script>"}
    )
    return P


def page(web):
    res = web.simulate_get(f"/{P}/")
    assert res.status_code == 200
    return res


def test_description_and_repository_are_shown_escaped(web, admin, project):
    project_verbs.set_settings(admin, P, {"repository_url": REPO})
    text = page(web).text
    assert '<p class="about" id="about">Line one\n&lt;script&gt;x()&lt;/script&gt;</p>' in text
    assert "<script>x()" not in text
    href = REPO.replace("&", "&amp;")
    assert f'<a id="repository" href="{href}" rel="noopener noreferrer nofollow">{href}</a>' in text
    # A title that reads like a placeholder stays text: one substitution pass.
    assert '<h1 id="title">{{about}} &amp; &lt;i&gt;co&lt;/i&gt;</h1>' in text
    assert "{{" not in text.replace("{{about}} &amp;", "")
    body = web.simulate_get(f"/{P}/stats.json").json
    assert body["description"].startswith("Line one") and body["repository_url"] == REPO
    assert body["logo_url"] == ""


def test_the_logo_origin_alone_is_added_to_the_page_policy(web, admin, project):
    before = page(web)
    assert 'class="logo"' not in before.text
    assert "img-src 'self' data:;" in before.headers["content-security-policy"]
    project_verbs.set_settings(admin, P, {"logo_url": LOGO})
    res = page(web)
    assert f'<img class="logo" src="{LOGO}" alt="" referrerpolicy="no-referrer">' in res.text
    policy = res.headers["content-security-policy"]
    assert "img-src 'self' data: https://img.example.net:8443;" in policy
    assert "script-src 'self';" in policy and "default-src 'self';" in policy
    # Other pages keep the plain policy.
    assert "img-src 'self' data:;" in web.simulate_get("/").headers["content-security-policy"]


@pytest.mark.parametrize(
    "bad",
    [
        "javascript:alert(1)",
        "data:image/png;base64,AAAA",
        "ftp://example.org/x",
        'https://example.org/"onerror="x',
        "https://example.org/a b",
        "https://user:pw@example.org/",
        "//example.org/logo.png",
        "https://" + "a" * 500 + ".org/",
    ],
)
def test_links_must_be_plain_http_urls(admin, project, bad):
    for name in ("logo_url", "repository_url"):
        with pytest.raises(AdminError):
            project_verbs.set_settings(admin, P, {name: bad})


def test_the_admin_api_refuses_a_bad_link_with_its_reason(web, admin, project):
    token = tokens.create(admin.conn, P)[0]
    res = web.simulate_post(
        f"/api/admin/projects/{P}/settings",
        body=orjson.dumps({"logo_url": "javascript:alert(1)"}),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert res.status_code == 400 and "http://" in res.text


def test_older_fields_stand_in_and_are_checked_where_shown(web, admin, project, r):
    # projects.json's repository/logo take any text; the page shows them only as http(s) URLs.
    r.hset(ProjectKeys(P).settings, mapping={"repository": "javascript:alert(1)", "logo": LOGO})
    text = page(web).text
    assert "javascript:" not in text and 'id="repository"' not in text
    assert f'src="{LOGO}"' in text
    assert project_links.public_links({"repository": "https://a.example/x", "repository_url": ""}) == {
        "repository_url": "https://a.example/x",
        "logo_url": "",
    }
