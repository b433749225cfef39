"""NissaCallback with a real Hugging Face ``Trainer`` on CPU: a tiny BERT built from its config (nothing
downloaded) on a synthetic dataset, streaming to a real nissa-server; commands through ``TrainerControl``."""

from __future__ import annotations

import time

import pytest

transformers = pytest.importorskip("transformers")
import torch  # noqa: E402

import nissa  # noqa: E402
from leyline import Command, CommandAction, EventKind, decode_event  # noqa: E402
from leyline.commands import REQUEST_TYPES  # noqa: E402
from nissa.integrations.transformers import NissaCallback  # noqa: E402
from tests.e2e.api import trainer_events, wait_for  # noqa: E402
from tests.support.server import running_server  # noqa: E402


class Pairs(torch.utils.data.Dataset):
    """Sequences of token ids whose label is whether token 1 appears: learnable, made up, tiny."""

    def __init__(self, n: int = 64, length: int = 8, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(2, 30, (n, length), generator=g)
        self.ids[: n // 2, 3] = 1
        self.labels = (self.ids == 1).any(1).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.labels[i]}


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16, num_labels=2)
    return transformers.BertForSequenceClassification(config)


def _trainer(tmp_path, callback: NissaCallback, **args) -> transformers.Trainer:
    defaults = dict(output_dir=str(tmp_path / "out"), max_steps=8, per_device_train_batch_size=8, logging_steps=2,
                    eval_strategy="steps", eval_steps=4, save_strategy="no", report_to="none", use_cpu=True,
                    disable_tqdm=True, learning_rate=1e-3, run_name="bert-tiny", num_train_epochs=2)
    defaults.update(args)
    return transformers.Trainer(model=_model(), args=transformers.TrainingArguments(**defaults),
                                train_dataset=Pairs(), eval_dataset=Pairs(16, seed=1), callbacks=[callback])


def _submit(run: nissa.Run, action: CommandAction, **fields) -> str:
    command_id = f"local-{action.value}-{time.monotonic_ns()}"
    request = REQUEST_TYPES[action](run_id=run.run_id, **fields)
    run.runtime.commands.submit(Command(command_id=command_id, request=request, created_at=time.time()))
    return command_id


def test_a_trainer_run_streams_its_logs_config_and_end(tmp_path):
    with running_server(tmp_path) as url:
        callback = NissaCallback(server=url, log_dir=tmp_path / "runs", system_metrics=False)
        _trainer(tmp_path, callback).train()
        run = callback.run
        assert run is not None and run.finished and run.name == "bert-tiny"
        events = wait_for(lambda: (ev := trainer_events(url, run.run_id)) and ev[-1].kind is EventKind.RUN_FINISHED
                          and ev, 30, "the run's events")
    config = events[0].payload.config
    assert config["training_args.learning_rate"] == 1e-3 and config["model.hidden_size"] == 16
    metrics = [e for e in events if e.kind is EventKind.METRICS]
    train = [(e.step, e.payload.values["loss"]) for e in metrics if "loss" in e.payload.values]
    assert [step for step, _ in train] == [2, 4, 6, 8]  # the Trainer's global step, every logging_steps
    assert all("learning_rate" in e.payload.values for e in metrics if "loss" in e.payload.values)
    assert [e.step for e in metrics if "eval_loss" in e.payload.values] == [4, 8]
    assert not any("epoch" in e.payload.values for e in metrics)  # the Trainer's fraction of an epoch: an axis
    assert events[-1].payload.status == "completed" and run.epoch_count == 1  # 8 steps of 8: one epoch
    assert run.current_step == 8  # the run's steps are the Trainer's global steps, the ones its logs carry


def test_checkpoint_and_stop_go_through_the_trainers_control(tmp_path):
    run = nissa.init(run_name="hf", log_dir=tmp_path / "runs", system_metrics=False)
    trainer = _trainer(tmp_path, NissaCallback(run), max_steps=50, eval_strategy="no")
    saved = _submit(run, CommandAction.CHECKPOINT)
    stop = _submit(run, CommandAction.STOP)
    trainer.train()
    assert trainer.state.global_step == 1 and run.should_stop  # stopped at the boundary it was applied at
    assert (tmp_path / "out" / "checkpoint-1" / "trainer_state.json").exists()  # saved by the Trainer itself
    report = run.finish()
    assert report.complete
    events = [decode_event(line) for line in run.log_path.read_bytes().splitlines()]
    results = {e.payload.command_id: e.payload.result for e in events
               if e.kind is EventKind.COMMAND_STATUS and e.payload.status.value == "completed"}
    assert results[saved]["path"].endswith("checkpoint-1") and stop in results
    assert events[-1].payload.status == "stopped"


def test_a_runs_own_command_applies_at_the_end_of_a_step(tmp_path):
    run = nissa.init(run_name="hf", log_dir=tmp_path / "runs", system_metrics=False)
    trainer = _trainer(tmp_path, NissaCallback(run), max_steps=4, eval_strategy="no")
    seen: list[tuple[int, float]] = []

    @run.command("set_lr")
    def set_lr(value: float) -> dict:
        for group in trainer.optimizer.param_groups:
            group["lr"] = value
        seen.append((trainer.state.global_step, value))
        return {"lr": value}

    _submit(run, CommandAction.CALL, name="set_lr", args={"value": 0.5})
    trainer.train()
    assert seen == [(1, 0.5)]
    assert not run.finished  # a run handed in stays open for the caller
    run.finish()
