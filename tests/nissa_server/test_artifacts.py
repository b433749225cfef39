"""Artifacts: upload, list, download, and names that must not escape the artifact directory; only the
run's own trainer uploads, within a quota per run; an upload racing the run's deletion leaves nothing."""

import asyncio
import hashlib
import socket

import httpx
import msgspec
import pytest

from leyline.frames import STREAM_SECRET_HEADER
from leyline.ids import ArtifactName
from tests.support import SECRET, events_for, ingest_events, running_server

OWNER = {STREAM_SECRET_HEADER: SECRET}


@pytest.fixture
async def http(server_url):
    await ingest_events(server_url, events_for("art", 1))
    async with httpx.AsyncClient(base_url=server_url, timeout=30, headers=OWNER) as client:
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


@pytest.mark.parametrize("name", ["-rf", "--help", "-", "CON", "con.txt", "Nul", "COM1.log", "lpt9", "aux."])
async def test_names_a_command_or_windows_reads_otherwise_are_refused_with_the_rule(http, name):
    """A name starting with '-' is an option to a command given the file (``rm -rf``), refused as a run id
    starting with it is; a Windows device name is a device to a viewer saving the file under it."""
    put = await http.put(f"/runs/art/artifacts/{name}", content=b"x")
    assert put.status_code == 422, put.text
    assert "not starting with '-'" in put.json()["detail"] and "Windows device name" in put.json()["detail"]
    assert (await http.get(f"/runs/art/artifacts/{name}")).status_code == 422
    assert (await http.get("/runs/art/artifacts")).json() == []
    with pytest.raises(msgspec.ValidationError):  # nor may a command name one (``restore``)
        msgspec.convert(name, ArtifactName)


@pytest.mark.parametrize("name", ["a-b", "console.log", "CONFIG", "com10", ".hidden", "x--y.pt"])
async def test_names_near_the_refused_ones_are_kept(http, name):
    assert (await http.put(f"/runs/art/artifacts/{name}", content=b"x")).status_code == 201
    assert (await http.get(f"/runs/art/artifacts/{name}")).content == b"x"
    msgspec.convert(name, ArtifactName)


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
        async with httpx.AsyncClient(base_url=url, timeout=30, headers=OWNER) as http:
            assert (await http.put("/runs/big/artifacts/a.bin", content=b"x" * 1001)).status_code == 413

            async def chunks():
                for _ in range(5):
                    yield b"x" * 400

            assert (await http.put("/runs/big/artifacts/b.bin", content=chunks())).status_code == 413
            assert (await http.get("/runs/big/artifacts")).json() == []
        assert not [p for p in url.settings.artifacts_root.rglob("*") if p.is_file()]


async def test_only_the_runs_own_trainer_uploads(server_url):
    await ingest_events(server_url, events_for("victim", 1))
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        assert (await http.put("/runs/victim/artifacts/t.json", content=b"mine", headers=OWNER)).status_code == 201
        for headers in ({}, {STREAM_SECRET_HEADER: "another-secret-" + "1" * 30}, {STREAM_SECRET_HEADER: "short"}):
            resp = await http.put("/runs/victim/artifacts/t.json", content=b"forged", headers=headers)
            assert resp.status_code == 403 and "secret" in resp.json()["detail"], headers
        assert (await http.get("/runs/victim/artifacts/t.json")).content == b"mine"


async def test_a_run_holds_artifacts_up_to_its_quota(tmp_path):
    with running_server(tmp_path, max_run_artifacts=3, max_run_artifact_bytes=1000) as url:
        await ingest_events(url, events_for("q", 1))
        async with httpx.AsyncClient(base_url=url, timeout=30, headers=OWNER) as http:
            for name in ("a", "b", "c"):
                assert (await http.put(f"/runs/q/artifacts/{name}", content=b"x" * 300)).status_code == 201
            full = await http.put("/runs/q/artifacts/d", content=b"x")
            assert full.status_code == 413 and "3 artifacts" in full.json()["detail"]
            assert (await http.put("/runs/q/artifacts/c", content=b"x" * 400)).status_code == 201  # replaced
            over = await http.put("/runs/q/artifacts/c", content=b"x" * 401)
            assert over.status_code == 413 and "quota" in over.json()["detail"]
            assert sum(a["size"] for a in (await http.get("/runs/q/artifacts")).json()) == 1000


async def test_an_upload_racing_the_runs_deletion_leaves_no_row_and_no_file(tmp_path):
    token = {"Authorization": "Bearer race-token"}
    with running_server(tmp_path, token="race-token", lost_after_s=0.2, maintenance_interval_s=0.05) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30, headers={**OWNER, **token}) as http:
            for attempt in range(8):
                run_id = f"race{attempt}"
                await ingest_events(url, events_for(run_id, 1), token="race-token")
                while (await http.get(f"/runs/{run_id}")).json()["status"] != "lost":
                    await asyncio.sleep(0.05)
                uploads = [http.put(f"/runs/{run_id}/artifacts/t{i}.json", content=b"x" * 100_000) for i in range(4)]
                *puts, deleted = await asyncio.gather(*uploads, http.delete(f"/runs/{run_id}"))
                assert deleted.status_code == 200
                assert {p.status_code for p in puts} <= {201, 404}, [p.text for p in puts]
        root = url.settings.artifacts_root
        assert not [p for p in root.rglob("*") if p.is_file()]
    with running_server(tmp_path, token="race-token") as url:  # and no row: nothing left for any run
        assert url.app.state.nissa.store.read_sync(lambda conn: conn.execute(
            "SELECT COUNT(*) FROM artifacts").fetchone()[0]) == 0


@pytest.mark.single_backend  # the rows are edited as an older server wrote them, in SQLite
@pytest.mark.parametrize("name", ["-x.json", "aux.npz"])
async def test_an_artifact_an_older_server_stored_under_a_name_now_refused_still_downloads(tmp_path, name):
    """Nothing stored is lost to a tighter rule: the file is served (the rule's 422 is for names never stored), and
    its suggested file name is prefixed with '_' (no option to a command, no Windows device)."""
    import sqlite3

    with running_server(tmp_path, db_path=tmp_path / "old.db") as url:
        await ingest_events(url, events_for("old", 1))
        async with httpx.AsyncClient(base_url=url, timeout=30, headers=OWNER) as http:
            assert (await http.put("/runs/old/artifacts/kept.json", content=b"trace")).status_code == 201
            held = next(p for p in url.settings.artifacts_root.rglob("kept.json"))
            held.rename(held.with_name(name))  # as an older server, whose rule took the name, stored it
            with sqlite3.connect(tmp_path / "old.db") as conn:
                conn.execute("UPDATE artifacts SET name = ? WHERE name = 'kept.json'", (name,))
            listed = (await http.get("/runs/old/artifacts")).json()
            assert [a["name"] for a in listed] == [name]
            got = await http.get(listed[0]["url"])
            assert got.status_code == 200 and got.content == b"trace"
            assert f'filename="_{name}"' in got.headers["content-disposition"]
            assert (await http.get("/runs/old/artifacts/-y.json")).status_code == 422  # never stored: the rule
            assert (await http.put(f"/runs/old/artifacts/{name}", content=b"new")).status_code == 422
