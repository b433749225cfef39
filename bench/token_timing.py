"""Bearer-token check timing: does a wrong token get its answer sooner the less of it is right?

``nissa_server.auth.bearer_ok`` on a 64-character token, for a wrong token that differs in its first
character, one that differs only in its last, a wrong length, and the right token; the cases run
interleaved, round after round, so load on the machine falls on all of them alike.

Ends with one line: key=value pairs, ratio = (last character wrong) / (first character wrong), the
figure a timing attack would read: 1.0 when the comparison takes the same time however much matches.
"""

from __future__ import annotations

import argparse
import statistics
import time

from nissa_server.auth import bearer_ok

TOKEN = "k" * 64
CASES = {
    "first_wrong": "Bearer " + "x" + TOKEN[1:],
    "last_wrong": "Bearer " + TOKEN[:-1] + "x",
    "short": "Bearer " + TOKEN[:8],
    "right": "Bearer " + TOKEN,
}


def _ns_per_call(header: str, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        bearer_ok(header, TOKEN)
    return (time.perf_counter_ns() - start) / calls


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings from ``argv``: its own defaults, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000, help="calls per case and round")
    parser.add_argument("--rounds", type=int, default=9)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for name, header in CASES.items():
            samples[name].append(_ns_per_call(header, args.calls))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, ns in medians.items():
        print(f"{name:12s} {ns:8.1f} ns per check")
    ratio = medians["last_wrong"] / medians["first_wrong"]
    print(" ".join([*(f"{name}_ns={ns:.1f}" for name, ns in medians.items()), f"ratio={ratio:.3f}"]))


if __name__ == "__main__":
    main()
