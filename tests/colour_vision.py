"""Colours as a reader with a colour-vision deficiency sees them, for the report's palette tests: Machado, Oliveira and
Fernandes' simulation (IEEE TVCG 2009, severity 1.0) in linear sRGB, and the CIE76 difference in CIELAB (D65)."""

from __future__ import annotations

import itertools

import numpy as np

MACHADO = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}
_XYZ = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
_WHITE = _XYZ @ np.ones(3)


def _linear(hex_colour: str) -> np.ndarray:
    srgb = np.array([int(hex_colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)])
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def _lab(linear: np.ndarray) -> np.ndarray:
    t = (_XYZ @ np.clip(linear, 0, 1)) / _WHITE
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def seen(hex_colour: str, vision: str | None = None) -> np.ndarray:
    """The colour in CIELAB, as normal vision (None) or the named deficiency sees it."""
    linear = _linear(hex_colour)
    return _lab(linear if vision is None else np.array(MACHADO[vision]) @ linear)


def closest_pair(colours: dict[str, str]) -> tuple[float, str, tuple[str, str]]:
    """The smallest CIE76 difference between any two of `colours`, over normal vision and each deficiency: (the
    difference, the vision, the two names)."""
    return min(
        (float(np.linalg.norm(seen(colours[a], vision) - seen(colours[b], vision))), vision or "normal", (a, b))
        for vision in (None, *MACHADO)
        for a, b in itertools.combinations(colours, 2)
    )
