"""A profile window leaves the terminal alone: torch's profiler markers are dropped, anything else on
stderr (a real error from the profiler, the program's own lines) still gets through."""

from __future__ import annotations

import os
import sys

import torch

from nissa.telemetry.profiler import ProfileWindow
from nissa.telemetry.quiet import without_profiler_markers

MARKERS = (b"USDT:2026-01-01 10:00:00 7407:7407 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
           b"USDT:2026-01-01 10:00:01 7407:7407 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")


def test_markers_are_dropped_and_everything_else_kept_in_order(capfd):
    with without_profiler_markers():
        os.write(2, b"ERROR:2026-01-01 10:00:00 1:1 CuptiActivityApi.cpp:1] a real error\n" + MARKERS)
        print("the program's own line", file=sys.__stderr__, flush=True)  # fd 2, as outside pytest
        os.write(2, b"no newline at the end")
    print("after", file=sys.__stderr__, flush=True)
    err = capfd.readouterr().err
    assert err == ("ERROR:2026-01-01 10:00:00 1:1 CuptiActivityApi.cpp:1] a real error\n"
                   "the program's own line\nno newline at the endafter\n")


def test_what_was_captured_is_passed_on_even_when_the_call_raises(capfd):
    try:
        with without_profiler_markers():
            os.write(2, MARKERS + b"the profiler said why it failed\n")
            raise RuntimeError("export failed")
    except RuntimeError:
        pass
    assert capfd.readouterr().err == "the profiler said why it failed\n"


def test_a_profile_window_prints_nothing(tmp_path, capfd):
    model = torch.nn.Linear(4, 2)
    window = ProfileWindow("w1", batches=2, trace_dir=tmp_path / "w1")
    window.start()
    while not window.step():
        model(torch.randn(8, 4)).sum().backward()
    captured = capfd.readouterr()
    assert window.result is not None and window.result.trace_path.is_file()
    assert captured.err == "" and captured.out == ""
