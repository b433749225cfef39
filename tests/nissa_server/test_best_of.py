"""A series' best, one rule (``leyline.summaries.best_of``) in Python and in each store's SQL: a direction read from
the last word of a metric's name, and the best a store keeps as points arrive in several passes and directions
are declared after them (the paths where the SQL, not Python, picks the best)."""

from __future__ import annotations

import httpx
import pytest

from leyline import Metrics, RunStarted, SummaryUpdated, make_event
from leyline.summaries import best_of, direction_of
from tests.support import IngestClient, running_server
from tests.support.waiting import async_wait_for


@pytest.mark.parametrize(("name", "direction"), [
    ("val_loss", "min"), ("train/loss", "min"), ("valLoss", "min"), ("test_mse", "min"), ("top1_err", "min"),
    ("ppl", "min"), ("regret", "min"), ("eval/BLEU", "max"), ("val_acc", "max"), ("top1Accuracy", "max"),
    ("f1", "max"), ("recall@10", "max"), ("ppo_update.episode_return", "max"), ("score", "max"),
    ("loss_scale", "last"), ("grad_accum_steps", "last"), ("lr", "last"), ("", "last"), ("accumulate", "last"),
    ("errors_seen", "last"), ("lossy", "last"), ("scores.count", "last"),
])
def test_a_direction_is_read_from_the_last_word_of_the_name(name, direction):
    assert direction_of(name) == direction


def test_a_declared_direction_wins_and_best_of_picks_by_it():
    assert direction_of("loss_scale", {"loss_scale": "max"}) == "max" and direction_of("val_loss", {}) == "min"
    assert [best_of(d, min=1, max=3, last=2) for d in ("min", "max", "last", "other")] == [1, 3, 2, 2]


def _metrics(run_id: str, seq: int, values: dict[str, float]):
    return make_event(Metrics(values=values), run_id=run_id, seq=seq, ts=1.7e9 + seq, step=seq)


async def test_the_store_keeps_the_best_across_passes_and_late_declarations(tmp_path):
    """Each batch is summarised in a pass of its own, so the second folds into the stored row in SQL; the
    directions declared last are applied to stored rows in SQL too. Every best differs from what the opposite
    direction would give."""
    with running_server(tmp_path, series_interval_s=0.02) as url, httpx.Client(base_url=url, timeout=30) as http:
        async def stored(count_of: dict[str, int]) -> dict[str, dict]:
            async def done() -> bool:
                found = http.get("/runs/r").json()["metrics"]
                return all(found.get(k, {}).get("count") == n for k, n in count_of.items())
            await async_wait_for(done, timeout=30, message=f"summarised: {count_of}")
            return http.get("/runs/r").json()["metrics"]  # one rank: the keys as logged

        names = ("val_loss", "val_acc", "loss_scale", "grad_accum_steps")
        async with IngestClient(url, "r") as client:
            await client.send([make_event(RunStarted(name="r", config={}), run_id="r", seq=1, ts=1.7e9),
                               _metrics("r", 2, dict.fromkeys(names, 0.5))])
            await client.wait_ack(2)
            first = await stored(dict.fromkeys(names, 1))
            assert {k: first[k]["best"] for k in names} == dict.fromkeys(names, 0.5)
            await client.send([_metrics("r", 3, dict.fromkeys(names, 0.9)), _metrics("r", 4, dict.fromkeys(names, 0.2)),
                               _metrics("r", 5, {"grad_accum_steps": 0.7})])
            await client.wait_ack(5)
            folded = await stored({**dict.fromkeys(names, 3), "grad_accum_steps": 4})
            assert {k: folded[k]["best"] for k in names} == {"val_loss": 0.2, "val_acc": 0.9, "loss_scale": 0.2,
                                                              "grad_accum_steps": 0.7}
            await client.send([make_event(SummaryUpdated(directions={"loss_scale": "max", "grad_accum_steps": "min"}),
                                          run_id="r", seq=6, ts=1.7e9 + 6, step=6),
                               _metrics("r", 7, {"val_loss": 0.3})])
            await client.wait_ack(7)
            declared = await stored({"val_loss": 4})  # the same pass as the declarations
        assert {k: declared[k]["best"] for k in names} == {"val_loss": 0.2, "val_acc": 0.9, "loss_scale": 0.9,
                                                            "grad_accum_steps": 0.2}
