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
