"""A written plot is a real picture: a PNG that decodes whole, of the figure's size, with the
data drawn in it. A byte count passes for an empty figure, a blank canvas or a torn file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: matplotlib's first colours, the ones a plot of one to three series draws with.
C0, C1, C2 = "#1f77b4", "#ff7f0e", "#2ca02c"


def _rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int32)


def check_plot(path: Path, width: int, height: int, colours: tuple[str, ...] = ()) -> np.ndarray:
    """Check the PNG at ``path``: decodes, is ``width`` x ``height`` pixels (figsize x dpi), is
    neither blank nor filled, and shows each of ``colours`` (a drawn series); its RGB pixels."""
    from PIL import Image

    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path}: not a PNG"
    with Image.open(path) as image:
        image.verify()  # the chunks' CRCs: a torn file fails here
    with Image.open(path) as image:
        assert image.size == (width, height), f"{path}: {image.size}, expected {(width, height)}"
        pixels = np.asarray(image.convert("RGB"), dtype=np.int32)
    inked = (pixels < 250).any(axis=2).mean()
    assert 0.01 < inked < 0.6, f"{path}: {inked:.1%} of the pixels drawn on"
    for colour in colours:
        near = (np.abs(pixels - _rgb(colour)).max(axis=2) <= 40).sum()
        assert near >= 30, f"{path}: no series drawn in {colour} ({near} pixels)"
    return pixels
