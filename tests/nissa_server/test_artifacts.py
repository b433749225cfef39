"""Artifacts: upload, list, download, and names that must not escape the artifact directory."""

import hashlib
import socket

import httpx
import pytest

from tests.support import events_for, ingest_events, running_server


@pytest.fixture
async def http(server_url):
    await ingest_events(server_url, events_for("art", 1))
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:
        yield client


async def test_upload_list_download(http, server_url):
    data = bytes(range(256)) * 1000
    resp = await http.put("/runs/art/artifacts/trace.pt.trace.json", content=data)
    assert resp.status_code == 201
    info = resp.json()
    assert info == {"name": "trace.pt.trace.json", "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                    "created_at": info["created_at"], "url": "/runs/art/artifacts/trace.pt.trace.json"}
    assert [a["name"] for a in (await http.get("/runs/art/artifacts")).json()] == ["trace.pt.trace.json"]
    assert (await http.get(info["url"])).content == data
    # Replacing keeps one entry.
    assert (await http.put("/runs/art/artifacts/trace.pt.trace.json", content=b"v2")).status_code == 201
    assert (await http.get(info["url"])).content == b"v2"
    root = server_url.settings.artifacts_root
    assert [p.name for p in root.rglob("*") if p.is_file()] == ["trace.pt.trace.json"]


def _raw_status(url: str, method: str, path: str) -> int:
    """Send ``path`` byte for byte (HTTP clients would resolve the dot segments themselves)."""
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx".encode())
        return int(sock.recv(4096).split(b" ")[1])


@pytest.mark.parametrize("name", ["..", ".", "...", "../../etc/passwd"])
async def test_dot_segments_never_reach_outside(http, server_url, name):
    for method in ("PUT", "GET"):
        assert _raw_status(server_url, method, f"/runs/art/artifacts/{name}") in (404, 422)


@pytest.mark.parametrize("name", ["a b", "a%2Fb", "%2e%2e", "..%2F..%2Fetc", "x" * 200, "ü.txt"])
async def test_bad_names_are_refused(http, name):
    put = await http.put(f"/runs/art/artifacts/{name}", content=b"x")
    get = await http.get(f"/runs/art/artifacts/{name}")
    assert put.status_code in (404, 422) and get.status_code in (404, 422), (put.status_code, get.status_code)


async def test_an_empty_body_is_refused_and_stores_nothing(http, server_url):
    resp = await http.put("/runs/art/artifacts/empty.json", content=b"")
    assert resp.status_code == 422 and "empty" in resp.json()["detail"]
    assert (await http.get("/runs/art/artifacts")).json() == []
    assert not [p for p in server_url.settings.artifacts_root.rglob("*") if p.is_file()]


async def test_unknown_run_and_missing_artifact(http):
    assert (await http.put("/runs/nope/artifacts/a.txt", content=b"x")).status_code == 404
    assert (await http.get("/runs/nope/artifacts")).status_code == 404
    assert (await http.get("/runs/art/artifacts/missing.txt")).status_code == 404


async def test_size_limit(tmp_path):
    with running_server(tmp_path, max_artifact_bytes=1000) as url:
        await ingest_events(url, events_for("big", 1))
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            assert (await http.put("/runs/big/artifacts/a.bin", content=b"x" * 1001)).status_code == 413

            async def chunks():
                for _ in range(5):
                    yield b"x" * 400

            assert (await http.put("/runs/big/artifacts/b.bin", content=chunks())).status_code == 413
            assert (await http.get("/runs/big/artifacts")).json() == []
        assert not [p for p in url.settings.artifacts_root.rglob("*") if p.is_file()]
