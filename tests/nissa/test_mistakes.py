"""A caller's mistakes with ``nissa.init`` and ``Run``: each a ValueError, TypeError or RuntimeError at once,
naming what is wrong; nothing is logged that the hub would refuse and drop later."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import nissa
from leyline import EventKind, decode_event


@pytest.fixture
def run(tmp_path):
    run = nissa.init(run_name="mistakes", log_dir=tmp_path)
    yield run
    run.finish()


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"server": "localhost:8765"}, ValueError, r"^nissa.init: server: expected http://host:port"),
    ({"server": 8765}, TypeError, "server must be a URL string"),
    ({"run_name": ""}, ValueError, "run_name must be a non-empty string"),
    ({"config": "lr=0.1"}, TypeError, "config must be a mapping"),
    ({"steps_per_epoch": "3"}, ValueError, "steps_per_epoch must be an int >= 0"),
    ({"device": "tpu"}, ValueError, "device 'tpu' is neither auto nor a torch device"),
    ({"stack_watchdog_s": -1}, ValueError, "stack_watchdog_s must be seconds >= 0"),
    ({"rank_timeout_s": 0}, ValueError, "rank_timeout_s must be seconds > 0"),
    ({"level": 3}, ValueError, "level must be one of"),
])
def test_init_refuses_a_bad_argument_naming_it(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        nissa.init(log_dir=tmp_path, **kwargs)
    assert not any(tmp_path.iterdir())  # refused before any run directory was made


def test_init_names_nissa_server_when_the_environment_is_wrong(tmp_path, monkeypatch):
    monkeypatch.setenv("NISSA_SERVER", "127.0.0.1:8765")
    with pytest.raises(ValueError, match=r"\$NISSA_SERVER: expected http://host:port"):
        nissa.init(log_dir=tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without CUDA")
def test_init_refuses_cuda_where_there_is_none(tmp_path):
    with pytest.raises(ValueError, match="sees no CUDA device"):
        nissa.init(log_dir=tmp_path, device="cuda")


@pytest.mark.parametrize(("values", "kwargs", "error", "match"), [
    ("loss", {}, TypeError, "expected a mapping of metric names to numbers, got str"),
    ({"loss": "0.5"}, {}, ValueError, "'loss' must be a number or a one-element tensor, got str"),
    ({"loss": torch.tensor(1.0, device="meta")}, {}, ValueError, "'loss' is on the meta device"),
    ({"loss": torch.tensor(1 + 2j)}, {}, ValueError, "'loss' is complex"),
    ({"loss": torch.tensor([1.0]).to_sparse()}, {}, ValueError, "'loss' must be a dense tensor"),
    ({"loss": 10**400}, {}, ValueError, "'loss' is too large for a float"),
    ({"loss": 1.0}, {"step": "3"}, ValueError, "step must be a whole number from 0 to 2\\^53 .*, got '3'"),
    ({"loss": 1.0}, {"step": 2**53 + 1}, ValueError, "step must be a whole number .*, got 9007199254740993"),
    ({"loss": 1.0}, {"labels": {"split": 1}}, ValueError, "label 'split' must be a string"),
    ({"loss": 1.0}, {"labels": {"a b": "c"}}, ValueError, "bad label name 'a b'"),
])
def test_log_refuses_a_bad_value_at_once_and_logs_nothing_of_it(run, values, kwargs, error, match):
    with pytest.raises(error, match=match):
        run.log(values, **kwargs)
    run.log({"loss": np.float32(0.5), "nan": torch.tensor(float("nan"))}, step=np.int64(7), labels={"split": "val"})
    assert "lost" not in run.finish().describe()
    events = [decode_event(line) for line in run.log_path.read_bytes().splitlines()]  # type: ignore[attr-defined]
    metrics = [e for e in events if e.kind is EventKind.METRICS]
    assert [(m.step, m.payload.values, m.payload.labels) for m in metrics] == [
        (7, {"loss": 0.5, "nan": "nan"}, {"split": "val"})]


def test_a_finished_run_says_so_when_used(run):
    run.finish()
    for what, use in [("run.log", lambda: run.log({"loss": 1.0})), ("run.step", run.step),
                      ("run.epoch_end", run.epoch_end), ("run.phase", lambda: run.phase("validate").__enter__()),
                      ("run.watch", lambda: run.watch(torch.nn.Linear(1, 1))),
                      ("run.command", lambda: run.command("set_lr")(lambda value: value)),
                      ("with run", run.__enter__)]:
        with pytest.raises(RuntimeError, match=f"^{what}: run {run.run_id} has finished"):
            use()
    assert run.finished and run.finish() is run.finish()
    other = nissa.init(log_dir=run.run_dir.parent)
    with pytest.raises(ValueError, match="status must be one of"):
        other.finish("done")
    assert other.finish("failed", error="boom").complete


def test_importing_nissa_imports_no_torch_and_starts_no_thread():
    code = ("import sys, threading; import nissa; help(nissa.init); "
            "print('torch' in sys.modules, threading.active_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "False 1"


def test_upload_names_what_is_wrong(tmp_path):
    from nissa.hub.rest import ServerUnavailable

    with pytest.raises(FileNotFoundError, match="is not a directory"):
        nissa.upload(tmp_path / "missing", "http://127.0.0.1:9")
    with pytest.raises(FileNotFoundError, match=r"a run's directory, <log_dir>/<run_id>, holds them"):
        nissa.upload(tmp_path, "http://127.0.0.1:9")
    run = nissa.init(log_dir=tmp_path)
    run.finish()
    with pytest.raises(ValueError, match="^nissa.upload: server: expected http://host:port"):
        nissa.upload(run.run_dir, "127.0.0.1:9")
    with pytest.raises(ServerUnavailable, match="^nissa.upload: no nissa-server answers at http://127.0.0.1:9: "):
        nissa.upload(run.run_dir, "http://127.0.0.1:9")


def test_declarations_and_hooks_refuse_what_would_fail_later(run):
    def set_lr(value: float) -> float:
        return value

    for name, fn, error, match in [("set lr", set_lr, ValueError, "command name 'set lr': 1-64 characters"),
                                   (5, set_lr, ValueError, "command name 5"),
                                   ("zz", 5, TypeError, "command 'zz': expected a function to declare, got int")]:
        with pytest.raises(error, match=match):
            run.command(name)(fn)
    def camel(lrValue: float) -> float:  # noqa: N803 - the name under test
        return lrValue

    with pytest.raises(ValueError, match=r"command 'camel': .*\$\.args\[0\]\.name"):
        run.command("camel")(camel)
    for i in range(64):
        run.command(f"c{i}")(set_lr)
    with pytest.raises(ValueError, match="at most 64 commands"):
        run.command("one_too_many")(set_lr)
    with pytest.raises(TypeError, match="run.on_checkpoint: expected a function of the step, got int"):
        run.on_checkpoint(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="run.on_stop: expected a function of the step, got NoneType"):
        run.on_stop(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="run.phase: name must be a non-empty string, got 3"):
        run.phase(3).__enter__()  # type: ignore[arg-type]
    run.finish()
    events = [decode_event(line) for line in run.log_path.read_bytes().splitlines()]  # type: ignore[attr-defined]
    assert [c.name for c in events[0].payload.commands] == [f"c{i}" for i in range(64)]  # run_started went out


def test_numpy_numbers_in_the_config_stay_numbers(tmp_path):
    run = nissa.init(log_dir=tmp_path, config={"batch": np.int64(32), "lr": np.float32(0.5), "opt": {"beta": 0.9}})
    run.finish()
    started = decode_event(run.log_path.read_bytes().splitlines()[0]).payload  # type: ignore[attr-defined]
    assert started.config == {"batch": 32, "lr": 0.5, "opt.beta": 0.9}


def test_a_server_url_where_no_nissa_server_answers_is_said_so(tmp_path, caplog):
    import socket
    import threading

    with socket.create_server(("127.0.0.1", 0)) as listener:  # answers anything with what is not HTTP
        def answer() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:  # the whole request read first: a close with unread bytes would reset the connection
                    request = b""
                    while b"\r\n\r\n" not in request and (chunk := conn.recv(4096)):
                        request += chunk
                    conn.sendall(b"SSH-2.0-not-http\r\n\r\n")

        threading.Thread(target=answer, daemon=True).start()
        run = nissa.init(server=f"http://127.0.0.1:{listener.getsockname()[1]}", log_dir=tmp_path)
        run.log({"loss": 1.0})
        assert not run.finish(timeout=1).complete
    assert "(is it a nissa-server?)" in caplog.text


def test_a_server_url_naming_a_page_says_to_give_the_servers_address(tmp_path, caplog):
    # http://host:port/ui is the web page: its websocket is refused with HTTP 403, which read like a wrong token.
    from tests.support.server import running_server

    with running_server(tmp_path) as url:
        run = nissa.init(server=f"{url}/ui", log_dir=tmp_path / "runs")
        run.log({"loss": 1.0})
        assert not run.finish(timeout=2).complete
    assert "HTTP 403 (no nissa-server ingest at that URL: give the server's address, http://host:port)" in caplog.text
