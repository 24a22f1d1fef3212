"""A label class's colour, as CSS writes it, in the one form the explorer keeps: '#rrggbb'.

Accepted (case-insensitive, as CSS reads them): #rgb, #rgba, #rrggbb, #rrggbbaa; rgb() and rgba() with numbers
(0-255) or percentages, separated by commas or spaces, with an optional alpha; and the 148 CSS named colours
(Bokeh's list). Channels out of range are clamped, as CSS does. The alpha is dropped: the class map draws every
class at one opacity. Anything else is refused (ValueError), so that no colour that cannot be drawn reaches the
class map or a style attribute.
"""
from __future__ import annotations

import re

from bokeh.colors import named

from app.state import SHOWN

LONGEST = 64  # characters: no CSS colour of these forms is longer (and no regular expression sees more)

_HEX = re.compile(r"#([0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})")
_NUM = r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)(%?)\s*"
_RGB = re.compile(rf"rgba?\({_NUM},{_NUM},{_NUM}(?:,{_NUM})?\)|rgba?\({_NUM}\s{_NUM}\s{_NUM}(?:/{_NUM})?\)")
_NAMES = frozenset(named.__all__)


def normalise(value) -> str | None:
    """'#rrggbb' for a CSS colour, None for None (no colour given: the palette chooses); ValueError otherwise."""
    if value is None:
        return None
    text = value.strip().lower() if isinstance(value, str) and len(value) <= LONGEST else None
    if text is not None:
        if m := _HEX.fullmatch(text):
            h = m.group(1)
            return "#" + (h[:6] if len(h) > 4 else "".join(c * 2 for c in h[:3]))
        if m := _RGB.fullmatch(text):
            groups = [g for g in m.groups() if g is not None]
            channels = [(float(groups[i]), groups[i + 1]) for i in (0, 2, 4)]
            if len({unit for _, unit in channels}) == 1:  # CSS takes all three as numbers or all as percentages
                return "#" + "".join(f"{_channel(x, unit):02x}" for x, unit in channels)
        if text in _NAMES:
            return getattr(named, text).to_hex()
    shown = repr(value)
    raise ValueError(f"colour {shown[:SHOWN]}{'...' if len(shown) > SHOWN else ''} is not a CSS colour "
                     "(#rgb, #rrggbb, rgb(), rgba() or a colour name)")


def _channel(x: float, unit: str) -> int:
    v = x * 255 / 100 if unit == "%" else x
    return int(min(max(v, 0.0), 255.0) + 0.5)
