"""The run's stream secret: one private file per run directory, shared by its ranks, sent on every
connection and upload; a server that knows the run under another secret refuses, and the hub stops."""

from __future__ import annotations

import stat
import threading

import httpx
import pytest

from leyline.esper import SeedGerminated
from leyline.frames import CLOSE_DELETED, CLOSE_FORBIDDEN
from nissa.hub import HubConfig, NissaHub
from nissa.hub.secret import SECRET_FILE, SecretError, run_secret
from nissa.hub.upload import upload_run
from tests.support.server import running_server
from tests.support.waiting import wait_for


def _seed(i: int) -> SeedGerminated:
    return SeedGerminated(slot="r0c0", seed_id=f"s{i}", blueprint="conv", params=1)


def _logged_run(log_dir, run_id: str, n: int = 5, rank: int = 0) -> NissaHub:
    hub = NissaHub(HubConfig(run_id=run_id, log_dir=log_dir, rank=rank)).start()
    for i in range(n):
        hub.emit(_seed(i), step=i, epoch=0)
    hub.close(timeout=30)
    return hub


def test_one_private_secret_per_run_shared_by_its_ranks(tmp_path):
    _logged_run(tmp_path, "ranked", rank=0)
    path = tmp_path / "ranked" / SECRET_FILE
    secret = path.read_text().strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(secret) >= 32
    _logged_run(tmp_path, "ranked", rank=1)
    assert run_secret(tmp_path / "ranked") == secret
    assert sorted(p.name for p in (tmp_path / "ranked").iterdir()) == [
        "events.jsonl", "events.rank1.jsonl", SECRET_FILE]


def test_ranks_starting_together_agree_on_one_secret(tmp_path):
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(run_secret(tmp_path / "race"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len(set(got)) == 1
    assert [p.name for p in (tmp_path / "race").iterdir()] == [SECRET_FILE]  # no drafts left behind


def test_a_damaged_secret_file_is_named(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / SECRET_FILE).write_text("short")
    with pytest.raises(SecretError, match=SECRET_FILE):
        run_secret(tmp_path / "bad")


def test_a_hub_without_the_runs_secret_stops_and_says_why(tmp_path):
    with running_server(tmp_path) as url:
        owner = NissaHub(HubConfig(run_id="taken", log_dir=tmp_path / "a", server=url)).start()
        owner.emit(_seed(0), step=0, epoch=0)
        owner.flush(timeout=30)
        intruder = NissaHub(HubConfig(run_id="taken", log_dir=tmp_path / "b", server=url)).start()
        intruder.emit(_seed(1), step=0, epoch=0)
        wait_for(lambda: intruder.report().refused, timeout=30, message="the refusal")
        assert str(CLOSE_FORBIDDEN) in intruder.report().refused
        assert "refused the stream" in intruder.close(timeout=5).describe()
        owner.emit(_seed(2), step=1, epoch=0)  # the owner was never displaced
        report = owner.close(timeout=30)
        assert report.complete and report.refused is None
        metrics = wait_for(lambda: _metrics(url), message="metrics")
    assert 'nissa_frames_rejected_total{reason="wrong_secret"} 1.0' in metrics  # one try: no retry loop


def _metrics(url: str) -> str:
    return httpx.get(f"{url}/metrics", timeout=10).text


def test_upload_binds_a_run_logged_before_secrets_and_then_holds_to_it(tmp_path):
    _logged_run(tmp_path / "runs", "legacy")
    run_dir = tmp_path / "runs" / "legacy"
    (run_dir / SECRET_FILE).unlink()  # as a log written before stream secrets
    with running_server(tmp_path) as url:
        [first] = upload_run(run_dir, url, timeout=30)
        assert first.complete and (run_dir / SECRET_FILE).exists()
        (run_dir / SECRET_FILE).unlink()  # another secret now: the server holds to the first
        [again] = upload_run(run_dir, url, timeout=30)
    assert not again.complete and str(CLOSE_FORBIDDEN) in (again.error or "")


def test_the_hub_of_a_deleted_run_stops_and_says_why(tmp_path):
    with running_server(tmp_path, open=True, lost_after_s=0.2, maintenance_interval_s=0.05) as url:
        first = NissaHub(HubConfig(run_id="deleted", log_dir=tmp_path, server=url)).start()
        first.emit(_seed(0), step=0, epoch=0)
        assert first.close(timeout=30).complete
        wait_for(lambda: httpx.get(f"{url}/runs/deleted", timeout=10).json()["status"] == "lost", message="lost")
        assert httpx.delete(f"{url}/runs/deleted", timeout=10).status_code == 200
        again = NissaHub(HubConfig(run_id="deleted", log_dir=tmp_path, server=url)).start()  # it resumes
        again.emit(_seed(1), step=1, epoch=0)
        wait_for(lambda: again.report().refused, timeout=30, message="the refusal")
        assert str(CLOSE_DELETED) in again.report().refused and "new run" in again.report().refused
        again.close(timeout=5)
        assert httpx.get(f"{url}/runs/deleted", timeout=10).status_code == 404  # it did not come back
        metrics = wait_for(lambda: _metrics(url), message="metrics")
    assert 'nissa_frames_rejected_total{reason="deleted"} 1.0' in metrics  # one try: no retry loop
