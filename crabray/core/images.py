"""PNG pictures: their size, and smaller copies for agents.

Kept below both the action libraries (the ``screenshot`` action downscales on
request) and the backends (which take the pictures), so neither imports the
other. Pillow is imported only when a picture is actually resized.
"""

from __future__ import annotations

import io
import struct


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height of a PNG, read from its header.

    Raises:
        ValueError: The bytes are not a PNG.
    """
    if len(png) < 24 or not png.startswith(b"\x89PNG\r\n\x1a\n") or png[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def downscale_png(png: bytes, max_width: int, max_height: int | None = None) -> bytes:
    """A smaller copy of a PNG that fits in ``max_width`` x ``max_height``, aspect kept.

    An image that already fits is returned unchanged. Agents point at fractions
    of the screen, so a downscaled screenshot loses detail, not coordinates.

    Args:
        png: The image.
        max_width: Largest width of the copy, in pixels.
        max_height: Largest height; unbounded when ``None``.

    Raises:
        ValueError: A bound is below 1, or the bytes are not an image.
    """
    from PIL import Image

    if max_width < 1 or (max_height is not None and max_height < 1):
        raise ValueError("downscale bounds must be at least 1 pixel")
    width, height = png_size(png)
    scale = min(max_width / width, (max_height or height) / height)
    if scale >= 1:
        return png
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    with Image.open(io.BytesIO(png)) as image:
        small = image.convert("RGB").resize(size, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    small.save(out, format="PNG")
    return out.getvalue()
