"""A Hugging Face ``Trainer`` or an Accelerate loop that raises: the process dies of the exception, and the run
the integration started ends as ``failed`` with the error (neither library calls its callbacks or trackers on
an exception). Real libraries, tiny models, in a real process that dies, streaming to a real nissa-server."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import httpx
import pytest

from leyline import EventKind
from tests.e2e.api import trainer_events, wait_for
from tests.support.server import running_server

TRANSFORMERS = """
import torch, transformers
from nissa.integrations.transformers import NissaCallback

class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        ids = torch.arange(8) % 30 + 2
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor(i % 2)}

class Boom(transformers.TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:
            raise RuntimeError("the loss went away at step 3")

config = transformers.BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=16, num_labels=2)
args = transformers.TrainingArguments(output_dir=OUT, max_steps=8, per_device_train_batch_size=8, logging_steps=1,
                                      save_strategy="no", report_to="none", use_cpu=True, disable_tqdm=True,
                                      run_name="bert-raises")
callback = NissaCallback(server=URL, log_dir=OUT + "/runs", system_metrics=False)
transformers.Trainer(model=transformers.BertForSequenceClassification(config), args=args, train_dataset=Data(),
                     callbacks=[callback, Boom()]).train()
"""

ACCELERATE = """
import torch
from accelerate import Accelerator
from nissa.integrations.accelerate import NissaTracker

accelerator = Accelerator(cpu=True, log_with=NissaTracker("acc-raises", server=URL, log_dir=OUT + "/runs",
                                                          system_metrics=False))
accelerator.init_trackers("proj", config={"lr": 0.05})
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
model, opt = accelerator.prepare(model, opt)
x = torch.randn(32, 4)
for step in range(1, 9):
    loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
    accelerator.backward(loss)
    opt.step()
    opt.zero_grad()
    accelerator.log({"loss": loss.detach()}, step=step)
    if step == 3:
        raise RuntimeError("the loss went away at step 3")
accelerator.end_training()
"""


# The Trainer logs a step after its on_step_end (where the raise is); the Accelerate loop logs before it.
@pytest.mark.parametrize("library, program, last_logged", [("transformers", TRANSFORMERS, 2),
                                                            ("accelerate", ACCELERATE, 3)], ids=["hf", "accelerate"])
def test_a_run_whose_training_raises_ends_as_failed_with_the_error(tmp_path, library, program, last_logged):
    pytest.importorskip(library)
    with running_server(tmp_path) as url:
        code = f"URL = {str(url)!r}\nOUT = {str(tmp_path / 'out')!r}\n" + textwrap.dedent(program)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert done.returncode == 1 and "RuntimeError: the loss went away at step 3" in done.stderr, done.stderr
        (run,) = httpx.get(f"{url}/runs", timeout=10).json()
        events = wait_for(lambda: (ev := trainer_events(url, run["run_id"])) and ev[-1].kind is EventKind.RUN_FINISHED
                          and ev, 30, "the run's end")
        status = httpx.get(f"{url}/runs/{run['run_id']}", timeout=10).json()["status"]
    end = events[-1].payload
    assert (end.status, end.error) == ("failed", "RuntimeError: the loss went away at step 3")
    assert status == "failed"
    assert [e.step for e in events if e.kind is EventKind.METRICS and "loss" in e.payload.values][-1] == last_logged
