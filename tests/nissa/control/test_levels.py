"""DEBUG windows: open, revert by themselves, extend without stacking, cover the next PPO update."""

from __future__ import annotations

from leyline import TelemetryLevel, TelemetryLevelChanged
from nissa.control import LevelController

NORMAL, DEBUG = TelemetryLevel.NORMAL, TelemetryLevel.DEBUG


class Recorder:
    def __init__(self) -> None:
        self.changes: list[TelemetryLevelChanged] = []
        self.done: dict[str, dict] = {}

    def finisher(self, key: str):
        return lambda result: self.done.__setitem__(key, result)


def _controller(base=NORMAL) -> tuple[LevelController, Recorder]:
    rec = Recorder()
    return LevelController(base, rec.changes.append), rec


def test_window_covers_n_epoch_ends_counting_the_current_one_then_reverts():
    levels, rec = _controller()
    levels.open_window("c1", step=10, epoch=3, epochs=2, through_update=False, done=rec.finisher("c1"))
    assert levels.level is DEBUG and levels.until_epoch == 4
    levels.epoch_end(3)
    assert levels.level is DEBUG and "c1" not in rec.done
    levels.step(25)
    levels.epoch_end(4)
    assert levels.level is NORMAL
    assert [(c.previous, c.level) for c in rec.changes] == [(NORMAL, DEBUG), (DEBUG, NORMAL)]
    assert rec.changes[0].until_epoch == 4 and rec.changes[0].command_id == "c1"
    assert rec.done["c1"] == {"opened_epoch": 3, "closed_epoch": 4, "opened_step": 10, "closed_step": 25,
                              "covered_update": False}


def test_overlapping_windows_extend_and_never_stack():
    levels, rec = _controller()
    levels.open_window("a", step=1, epoch=1, epochs=2, through_update=False, done=rec.finisher("a"))
    levels.open_window("b", step=2, epoch=1, epochs=4, through_update=False, done=rec.finisher("b"))
    assert levels.until_epoch == 4
    levels.epoch_end(1)
    levels.epoch_end(2)
    assert "a" in rec.done and "b" not in rec.done and levels.level is DEBUG
    levels.epoch_end(3)
    levels.epoch_end(4)
    assert "b" in rec.done and levels.level is NORMAL
    ups_and_downs = [(c.previous, c.level) for c in rec.changes if c.previous is not c.level]
    assert ups_and_downs == [(NORMAL, DEBUG), (DEBUG, NORMAL)]
    assert any(c.reason == "window extended" and c.until_epoch == 4 for c in rec.changes)


def test_through_update_keeps_the_window_open_until_the_next_update_ends():
    levels, rec = _controller()
    levels.open_window("c", step=5, epoch=7, epochs=1, through_update=True, done=rec.finisher("c"))
    levels.epoch_end(7)
    levels.epoch_end(8)
    assert levels.level is DEBUG, "the epochs are over but the update has not run yet"
    levels.update_end()  # an update that began before the window does not count
    assert levels.level is DEBUG
    levels.update_begin()
    assert levels.level is DEBUG
    levels.update_end()
    assert levels.level is NORMAL and rec.done["c"]["covered_update"] is True


def test_a_window_for_the_update_alone_and_an_update_before_its_epochs_are_over():
    levels, rec = _controller()
    levels.open_window("u", step=1, epoch=1, epochs=None, through_update=True, done=rec.finisher("u"))
    assert levels.until_epoch is None and levels.level is DEBUG
    levels.update_begin()
    levels.update_end()
    assert levels.level is NORMAL and rec.done["u"]["covered_update"]
    levels.open_window("e", step=2, epoch=2, epochs=3, through_update=True, done=rec.finisher("e"))
    levels.update_begin()
    levels.update_end()
    assert levels.level is DEBUG, "the update was covered but the epochs are not over"
    for epoch in (2, 3, 4):
        levels.epoch_end(epoch)
    assert levels.level is NORMAL and "e" in rec.done


def test_base_debug_or_off_and_closing_at_run_end():
    levels, rec = _controller(base=DEBUG)
    levels.open_window("x", step=1, epoch=1, epochs=1, through_update=False, done=rec.finisher("x"))
    assert rec.changes == [] and levels.level is DEBUG
    off, rec_off = _controller(base=TelemetryLevel.OFF)
    off.open_window("y", step=1, epoch=1, epochs=5, through_update=False, done=rec_off.finisher("y"))
    assert off.level is DEBUG
    still_open = off.close_all("run ended")
    assert [c.key for c in still_open] == ["y"] and off.level is TelemetryLevel.OFF and "y" not in rec_off.done
