"""``python -m npudoctor.collective``: the collective probe as one torchrun worker, for your own launch
(``torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:PORT -m npudoctor.collective --backend hccl``).
Same options as ``npudoctor collective``; rank 0 prints the results."""

from __future__ import annotations


def main() -> None:
    from npudoctor.cli.fleet import collective

    collective(prog_name="python -m npudoctor.collective")


if __name__ == "__main__":
    main()
