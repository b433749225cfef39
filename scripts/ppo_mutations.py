"""Checks that the PPO tests pin the update: each mutation of ``trainer/simic/ppo.py`` must fail them.

    python scripts/ppo_mutations.py

Applies each mutation to the source in turn, runs ``tests/trainer/simic/test_ppo_math.py`` and restores
the file; exits 1 if the unmutated code fails or a mutation survives.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "trainer" / "simic" / "ppo.py"
TESTS = "tests/trainer/simic/test_ppo_math.py"
MUTATIONS = {
    "the policy loss's sign flipped": ("    return -((surrogate * used)", "    return ((surrogate * used)"),
    "the clamp removed": ("ratio.clamp(1 - clip, 1 + clip) * advantages)", "ratio * advantages)"),
    "maximum for minimum": ("return torch.minimum(ratio", "return torch.maximum(ratio"),
}


def _failed_tests() -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", TESTS],
                         cwd=ROOT, capture_output=True, text=True).stdout
    return [line.split("::")[-1].split(" ")[0] for line in out.splitlines() if line.startswith("FAILED")]


def main() -> int:
    original = SOURCE.read_text()
    if _failed_tests():
        print("the unmutated code fails its tests")
        return 1
    survived = 0
    try:
        for name, (before, after) in MUTATIONS.items():
            assert original.count(before) == 1, f"{name}: the line to mutate is not found once"
            SOURCE.write_text(original.replace(before, after))
            failed = _failed_tests()
            survived += not failed
            print(f"{name}: {len(failed)} failed ({', '.join(failed) or 'SURVIVED'})")
    finally:
        SOURCE.write_text(original)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
