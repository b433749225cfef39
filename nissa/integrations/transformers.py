"""``NissaCallback``: a Hugging Face Transformers ``Trainer`` as a Nissa run.

    from nissa.integrations.transformers import NissaCallback
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[NissaCallback(server=URL)])
    trainer.train()

The callback starts the run when training begins (``nissa.init`` with the ``TrainingArguments`` as its config,
the model's own config under ``model.``, and ``args.run_name`` as its name unless given), or reports into a
``run`` it is handed. What the Trainer logs (``on_log``: loss, learning rate, grad norm, eval metrics) is sent
as ``metrics`` at the Trainer's global step. The end of each optimizer step is a step boundary (``on_step_end``):
commands apply there, the run's own (``@run.command``) included; a ``checkpoint`` command sets the Trainer's
``should_save`` (it saves ``output_dir/checkpoint-<step>`` right after, as its own ``save_steps`` would) and a
``stop`` command its ``should_training_stop``, both through ``TrainerControl``. An epoch is the Trainer's epoch
(what a debug window's ``epochs`` counts). The run the callback started finishes with training; should
training raise, the Trainer calls no callback, and the run ends as ``failed`` with the error when that
exception ends the process (``nissa.integrations.uncaught``).

Built on the public ``TrainerCallback`` hooks only (pinned in constraints.txt, tested with a real ``Trainer``).
There is no ``report_to="nissa"``: transformers takes only the reporters of its own fixed table and has no
public way to add one, so the callback above is the one line.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from nissa.integrations.names import scalars
from nissa.integrations.steps import step_to
from nissa.integrations.uncaught import finish_on_uncaught
from nissa.run import Run


class NissaCallback(TrainerCallback):
    """See the module docstring. ``run``: report into this run (it stays open after training); otherwise
    ``init_args`` go to ``nissa.init`` (``server``, ``run_name``, ``log_dir``, ``token``, ``system_metrics`` …)."""

    def __init__(self, run: Run | None = None, *, watch: bool = True, **init_args: Any) -> None:
        if run is not None and init_args:
            raise TypeError(f"NissaCallback: give a run or nissa.init's arguments, not both ({sorted(init_args)})")
        self.run = run
        self._owned = run is None
        self._init_args = init_args
        self._watch = watch
        self._control: TrainerControl | None = None
        self._args: TrainingArguments | None = None
        self._state: TrainerState | None = None

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        model = kwargs.get("model")
        if self.run is None:
            import nissa

            config: dict[str, Any] = {"training_args": args.to_dict()}
            to_dict = getattr(getattr(model, "config", None), "to_dict", None)
            if callable(to_dict):
                config["model"] = to_dict()
            init = {"run_name": args.run_name or "transformers", "steps_per_epoch": 0, **self._init_args}
            self.run = nissa.init(config=config, **init)
            finish_on_uncaught(self.run)  # a Trainer that raises calls no callback: the run ends as failed
        elif self.run.current_step is None:
            self.run.steps_per_epoch = 0  # the Trainer's epochs, not one per step
        self._args, self._state = args, state
        if not self.run.takes_checkpoints:
            self.run.on_checkpoint(self._save)
        if self._watch and model is not None:
            self.run.watch(model, name=type(model).__name__)
        self.run.start()

    def _save(self, step: int) -> dict[str, Any]:
        """A ``checkpoint`` command: the Trainer saves right after this step, where its own saves go."""
        assert self._control is not None and self._args is not None and self._state is not None
        self._control.should_save = True
        return {"path": f"{self._args.output_dir}/checkpoint-{self._state.global_step}",
                "global_step": self._state.global_step}

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        if self.run is None or self.run.finished:
            return
        self._control, self._state = control, state
        step_to(self.run, state.global_step)  # the Trainer's own count: what on_log stamps its values with
        if self.run.should_stop:
            control.should_training_stop = True
            control.should_save = True  # what a stop leaves behind: the state to go on from

    def on_epoch_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        if self.run is not None and not self.run.finished and self.run.steps_per_epoch == 0:
            self.run.epoch_end()

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.run is None or self.run.finished or not logs:
            return
        values = scalars((k, v) for k, v in logs.items() if k != "epoch")
        if values:
            self.run.log(values, step=state.global_step)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        if self.run is not None and self._owned:
            self.run.finish()
