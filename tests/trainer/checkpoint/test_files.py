"""Checkpoint files: written beside and renamed, checked against their manifest, the last K kept, a bad one
refused with one line naming it and the previous good one offered."""

from __future__ import annotations

import json
import os

import pytest
import torch

from trainer.checkpoint import CheckpointError, CheckpointStore, checkpoint_name
from trainer.checkpoint.resume import choose

STATE = {"progress": {"round": 1}, "w": torch.arange(1000, dtype=torch.float32)}


def write(store: CheckpointStore, round_: int, world_size: int = 1) -> str:
    name = checkpoint_name(round_)
    store.write(name, {**STATE, "progress": {"round": round_}}, {"run_id": "r", "world_size": world_size})
    return name


def run_dir(tmp_path, rounds=(1, 2, 3)):
    store = CheckpointStore(tmp_path / "run" / "checkpoints")
    for r in rounds:
        write(store, r)
    return tmp_path / "run", store


def test_written_parts_check_out_and_leave_nothing_beside(tmp_path):
    _, store = run_dir(tmp_path, (1,))
    files = sorted(p.name for p in (store.root / "round-000001").iterdir())
    assert files == ["rank0.json", "rank0.pt"]
    manifest = json.loads((store.root / "round-000001" / "rank0.json").read_text())
    entry = manifest["files"]["rank0.pt"]
    assert entry["bytes"] == (store.root / "round-000001" / "rank0.pt").stat().st_size and len(entry["sha256"]) == 64
    loaded = store.load("round-000001")
    assert torch.equal(loaded["w"], STATE["w"]) and manifest["run_id"] == "r"


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_a_damaged_newest_checkpoint_is_refused_and_the_previous_offered(tmp_path, damage):
    run, store = run_dir(tmp_path)
    data = store.root / "round-000003" / "rank0.pt"
    if damage == "truncate":
        data.write_bytes(data.read_bytes()[:100])
    elif damage == "flip":
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))
    else:
        data.unlink()
    with pytest.raises(CheckpointError) as info:
        choose(run, None)
    line = str(info.value)
    assert "\n" not in line and "round-000003" in line and "rank0.pt" in line
    assert line.endswith(f"the previous good one is round-000002: --resume {run} --checkpoint round-000002")
    assert choose(run, "round-000002") == "round-000002"


def test_an_unfinished_checkpoint_is_passed_over(tmp_path):
    run, store = run_dir(tmp_path, (1, 2))
    (store.root / "round-000003").mkdir()
    (store.root / "round-000003" / "rank0.pt.tmp").write_bytes(b"half")
    assert choose(run, None) == "round-000002"


def test_a_checkpoint_missing_a_rank_is_not_complete(tmp_path):
    store = CheckpointStore(tmp_path / "checkpoints", rank=0)
    write(store, 1, world_size=2)
    assert not store.complete("round-000001")
    write(CheckpointStore(tmp_path / "checkpoints", rank=1), 1, world_size=2)
    assert store.complete("round-000001") and store.verify("round-000001")["world_size"] == 2


def test_an_unloadable_file_with_a_matching_manifest_is_refused(tmp_path):
    _, store = run_dir(tmp_path, (1,))
    store.write("round-000002", {"progress": {}}, {"run_id": "r", "world_size": 1})
    data = store.root / "round-000002" / "rank0.pt"
    data.write_bytes(b"not a zip file at all")
    meta = store.root / "round-000002" / "rank0.json"
    body = json.loads(meta.read_text())
    from trainer.checkpoint.files import sha256_of
    body["files"]["rank0.pt"] = {"bytes": data.stat().st_size, "sha256": sha256_of(data)}
    meta.write_text(json.dumps(body))
    with pytest.raises(CheckpointError, match=r"^checkpoint round-000002: rank0.pt cannot be loaded"):
        store.load("round-000002")


def test_the_last_k_are_kept(tmp_path):
    _, store = run_dir(tmp_path, (1, 2, 3, 4))
    (store.root / "round-000002" / "rank0.json").unlink()  # an unfinished one older than the newest: junk
    assert store.prune(2) == ["round-000001", "round-000002"]
    assert store.names() == ["round-000003", "round-000004"]


def test_resuming_from_an_older_checkpoint_sets_the_newer_ones_aside(tmp_path):
    """Their rounds are trained anew: left in place they would mix with the new checkpoints (and pruning could
    take one another rank is writing). Nothing is deleted."""
    from ranks import Ranks
    from trainer.checkpoint.resume import resume_point

    run, store = run_dir(tmp_path)
    point = resume_point(run, "round-000001", Ranks.single(), rounds=5)
    assert point.name == "round-000001" and store.names() == ["round-000001"]
    aside = store.root / "abandoned-after-round-000001"
    assert sorted(p.name for p in aside.iterdir()) == ["round-000002", "round-000003"]
    write(store, 2)
    resume_point(run, "round-000001", Ranks.single(), rounds=5)  # once more: a second place beside the first
    assert sorted(p.name for p in (store.root / "abandoned-after-round-000001-2").iterdir()) == ["round-000002"]
    assert resume_point(run, None, Ranks.single(), rounds=5).name == "round-000001"


def _hostile(store: CheckpointStore, how: str, elsewhere) -> None:
    """Round 3 made into what someone could leave in a run directory: each of these was read for ever."""
    part = store.root / "round-000003"
    meta, data = part / "rank0.json", part / "rank0.pt"
    body = json.loads(meta.read_text())
    if how == "state file a link to /dev/zero":
        data.unlink()
        data.symlink_to("/dev/zero")
        body["files"]["rank0.pt"]["bytes"] = 0  # what stat() says of /dev/zero
    elif how == "state file a pipe":
        data.unlink()
        os.mkfifo(data)
        body["files"]["rank0.pt"]["bytes"] = 0
    elif how == "manifest naming a file outside":
        body["files"]["../../../../dev/zero"] = {"bytes": 0, "sha256": "0" * 64}
    elif how == "manifest a link to /dev/zero":
        meta.unlink()
        meta.symlink_to("/dev/zero")
        return
    elif how == "checkpoint a link to another directory":
        part.rename(elsewhere)
        part.symlink_to(elsewhere, target_is_directory=True)
        return
    meta.write_text(json.dumps(body))


@pytest.mark.timeout(20)  # before, every one of these hung the resume
@pytest.mark.parametrize("how", ["state file a link to /dev/zero", "state file a pipe",
                                 "manifest naming a file outside", "manifest a link to /dev/zero",
                                 "checkpoint a link to another directory"])
def test_a_hostile_checkpoint_is_refused_without_being_read(tmp_path, how):
    run, store = run_dir(tmp_path)
    _hostile(store, how, tmp_path / "elsewhere")
    with pytest.raises(CheckpointError) as info:
        choose(run, "round-000003")
    line = str(info.value)
    assert "\n" not in line and "round-000003" in line and "the previous good one is round-000002" in line, line
    if how.startswith(("manifest a", "checkpoint")):  # not a complete checkpoint: the newest is passed over
        assert choose(run, None) == "round-000002"
    with pytest.raises(CheckpointError):
        CheckpointStore(store.root).load("round-000003")


@pytest.mark.parametrize("name", ["/etc", "round-000001/../round-000001", "../run/checkpoints/round-000001", ""])
def test_a_checkpoint_is_named_never_reached_by_a_path(tmp_path, name):
    run, store = run_dir(tmp_path, (1,))
    with pytest.raises(CheckpointError):
        store.verify(name)
    with pytest.raises(CheckpointError):
        store.manifest(name)
