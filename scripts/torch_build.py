#!/usr/bin/env python
"""Say which torch build is installed, and fail where it is not the one asked for.

``make install TORCH=cpu|cuda`` runs it after installing torch: a pip that finds another
wheel first (a local CPU wheel, a cached CUDA one) would otherwise go unnoticed until a
GPU job runs on the CPU, or a CPU machine carries GBs of CUDA libraries.

Usage: ``python scripts/torch_build.py cpu|cuda``.
"""

from __future__ import annotations

import sys


def describe() -> tuple[str, str | None]:
    """(torch's version, its CUDA version or None for the CPU build)."""
    import torch

    return torch.__version__, torch.version.cuda


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("cpu", "cuda"):
        print("Error: usage: torch_build.py cpu|cuda", file=sys.stderr)
        return 2
    wanted = argv[0]
    version, cuda = describe()
    build = f"CUDA {cuda}" if cuda else "CPU"
    print(f"torch {version}: the {build} build (TORCH={wanted})")
    if (wanted == "cuda") != bool(cuda):
        print(f"Error: TORCH={wanted} asked for the {wanted.upper()} build but torch {version} is the "
              f"{build} build: pip uninstall -y torch, then make install TORCH={wanted}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
