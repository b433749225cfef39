"""The server explains itself offline: ``GET /`` points the way, ``/docs`` and ``/redoc`` need no CDN."""

from __future__ import annotations

import re

import httpx
import pytest

pytestmark = pytest.mark.single_backend

# Every URL a documentation page loads: attributes, and Swagger UI's ``url: '…'`` in its inline script.
_REFERENCES = re.compile(r"""(?:src|href|spec-url)="([^"]+)"|\burl:\s*'([^']+)'""")


def test_root_points_to_the_docs_and_the_main_resources(server_url):
    index = httpx.get(f"{server_url}/", timeout=10)
    assert index.status_code == 200 and index.headers["content-type"] == "application/json"
    links = index.json()
    assert links["service"] == "nissa-server"
    assert {"docs", "runs", "health", "openapi"} <= set(links)
    for key, path in links.items():
        if key not in ("service", "version"):
            assert httpx.get(f"{server_url}{path}", timeout=10).status_code == 200, path


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_documentation_pages_load_only_files_the_server_serves(server_url, page):
    html = httpx.get(f"{server_url}{page}", timeout=10)
    assert html.status_code == 200 and "text/html" in html.headers["content-type"]
    assert "http://" not in html.text and "https://" not in html.text
    urls = [a or b for a, b in _REFERENCES.findall(html.text)]
    assert "/openapi.json" in urls and any(u.endswith(".js") for u in urls), urls
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
        asset = httpx.get(f"{server_url}{url}", timeout=30)
        assert asset.status_code == 200 and asset.content, url


def test_the_escalate_summary_names_every_action(server_url):
    summary = httpx.get(f"{server_url}/openapi.json", timeout=10).json()["paths"]["/escalate"]["post"]["summary"]
    for action in ("debug", "profile", "checkpoint", "stop"):
        assert action in summary, summary


def test_head_is_answered_wherever_get_is(server_url):
    for path in ("/", "/docs", "/redoc", "/openapi.json", "/ui", "/runs", "/healthz", "/metrics", "/alerts"):
        got, head = httpx.get(f"{server_url}{path}", timeout=30), httpx.head(f"{server_url}{path}", timeout=30)
        assert head.status_code == got.status_code == 200, (path, head.status_code)
        assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"], path
    assert httpx.head(f"{server_url}/runs/nope", timeout=30).status_code == 404
    refused = httpx.put(f"{server_url}/runs", timeout=30)
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect", "/docs-assets/swagger-ui.css"])
def test_documentation_pages_have_the_web_pages_protection(server_url, path):
    for reply in (httpx.get(f"{server_url}{path}", timeout=30), httpx.head(f"{server_url}{path}", timeout=30)):
        csp = reply.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline'; img" in csp
        assert "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";")[0], csp  # scripts by hash only
        assert reply.headers["x-frame-options"] == "DENY" and reply.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(("path", "drawn"), [("/docs", ".swagger-ui .info .title"), ("/redoc", "h1")])
def test_documentation_pages_work_under_their_policy(browser, server_url, path, drawn):
    """The policy lets the page's own script run (by its hash) and refuses nothing the page needs from this
    server (ReDoc's "powered by" logo from its CDN is refused: the policy doing its job)."""
    page = browser.new_page()
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.goto(f"{server_url}{path}")
    page.locator(drawn).first.wait_for(timeout=30_000)
    assert "nissa-server" in page.locator(drawn).first.inner_text()
    page.close()
    assert [text for text in refused if "https://cdn.redoc.ly/" not in text] == []
