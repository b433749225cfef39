"""What the console shows of any loop's run: its latest metrics, the commands it declared, and whether it is an
Esper run at all (a plain loop's run has no envs, seeds or PPO: those panels give way to its metrics).

``parse_call`` reads what the operator types to call one of the run's commands: ``set_lr value=0.01``
(``name`` alone when it takes no arguments), each value typed by the run's own declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leyline import Metrics
from leyline.calls import CallValue, CommandSpec, check_call

MAX_SHOWN = 24


@dataclass
class LoopView:
    """The loop-agnostic part of a run's state."""

    metrics: dict[str, tuple[int, float | str]] = field(default_factory=dict)
    """Latest value of each metric and the step it was logged at."""
    declared: list[CommandSpec] = field(default_factory=list)

    def fold(self, step: int, p: Metrics) -> None:
        for name, value in p.values.items():
            self.metrics[name] = (step, value)

    def rows(self) -> list[tuple[str, str, str]]:
        """(name, value, step) of the latest metrics, by name."""
        return [(name, fmt_value(value), str(step)) for name, (step, value) in sorted(self.metrics.items())[:MAX_SHOWN]]

    def offered(self) -> list[str]:
        """One line per declared command: ``set_lr value:float — help``."""
        return [f"{s.name} " + " ".join(f"{a.name}:{a.type}" + ("" if a.required else "?") for a in s.args)
                + (f" — {s.help}" if s.help else "") for s in self.declared]


def fmt_value(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:.6g}"


def _typed(text: str) -> CallValue:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_call(text: str, declared: list[CommandSpec]) -> tuple[str, dict[str, CallValue]]:
    """``"set_lr value=0.01"`` → ``("set_lr", {"value": 0.01})``, checked against ``declared``; ``ValueError``
    says what is wrong, as the server would."""
    words = text.split()
    if not words:
        raise ValueError("type a command: NAME [ARG=VALUE ...]")
    args: dict[str, CallValue] = {}
    for word in words[1:]:
        key, eq, raw = word.partition("=")
        if not eq or not key:
            raise ValueError(f"expected ARG=VALUE, got {word!r}")
        args[key] = _typed(raw)
    spec = next((s for s in declared if s.name == words[0]), None)
    if spec is not None:  # an int typed for a str argument stays the text the operator typed
        for arg in spec.args:
            if arg.type == "str" and arg.name in args:
                args[arg.name] = next(w.partition("=")[2] for w in words[1:] if w.partition("=")[0] == arg.name)
    check_call(declared, words[0], args)
    return words[0], args
