"""``python -m trainer``: ``esper-train`` as a module, which is how torchrun starts each rank::

    torchrun --standalone --nproc-per-node 2 -m trainer --server URL --log-dir DIR [esper-train options]
"""

from trainer.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
