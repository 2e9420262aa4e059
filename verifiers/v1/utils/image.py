"""Images as ``data:`` URLs, the form a message's image part carries them in."""

from __future__ import annotations

import base64
from io import BytesIO
from typing import Any


def image_data_url(image: Any) -> str:
    """A PIL image (anything with ``save(buffer, format=...)``) as a base64 PNG data URL."""
    buffer = BytesIO()
    image.save(buffer, format="PNG")
    return f"data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}"
