"""Controls of an explorer: each a widget bound to one keyword argument of the explored function.

Every control offers only valid values (a slider over the allowed tiles, a dropdown of dtypes), so a
learner cannot pick a value the function does not take; :func:`control_values` lists them (for tools
that step through every setting, such as ``npusim bench``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import ipywidgets as w
from matplotlib.figure import Figure

from ..errors import UsageError


@dataclass
class Control:
    """A widget bound to the keyword argument ``name`` of the explored function."""

    name: str
    widget: w.ValueWidget


def _desc(name: str, description: str | None) -> str:
    return description if description is not None else name


def int_choice(name: str, values: Sequence[int], value: int | None = None, description: str | None = None) -> Control:
    """A slider over the valid integers only (e.g. tiles ``[256, 512, 1024]``): a SelectionSlider."""
    vals = [int(v) for v in values]
    if not vals:
        raise UsageError(f"int_choice({name!r}) needs at least one value")
    value = vals[0] if value is None else int(value)
    if value not in vals:
        raise UsageError(f"int_choice({name!r}): value {value} is not one of {vals}")
    return Control(name, w.SelectionSlider(options=vals, value=value, description=_desc(name, description),
                                           continuous_update=False, style={"description_width": "initial"}))


def int_range(name: str, min: int, max: int, step: int = 1, value: int | None = None,
              description: str | None = None) -> Control:  # noqa: A002 (ipywidgets' own names)
    """An IntSlider from ``min`` to ``max`` in steps of ``step`` (only ``min + k*step`` can be chosen)."""
    if step <= 0 or (max - min) % step:
        raise UsageError(f"int_range({name!r}): max - min must be a positive multiple of step")
    return Control(name, w.IntSlider(min=min, max=max, step=step, value=min if value is None else value,
                                     description=_desc(name, description), continuous_update=False,
                                     style={"description_width": "initial"}))


def choice(name: str, options: Sequence[Any] | Mapping[str, Any], value: Any = None,
           description: str | None = None) -> Control:
    """A dropdown (dtype, preset, buffer count...). ``options`` may map labels to values."""
    opts = list(options.items()) if isinstance(options, Mapping) else list(options)
    kw = {} if value is None else {"value": value}
    # the description at its full width ("accumulate", not "accumula..."), the box as wide as its longest option
    labels = [str(o[0] if isinstance(o, tuple) else o) for o in opts]
    desc = _desc(name, description)
    chars = len(desc) + max(map(len, labels), default=8) + 6
    return Control(name, w.Dropdown(options=opts, description=desc, style={"description_width": "initial"},
                                    layout=w.Layout(width=f"{min(chars, 60)}ch"), **kw))


def toggle(name: str, value: bool = False, description: str | None = None) -> Control:
    """An on/off switch (e.g. fusion)."""
    return Control(name, w.ToggleButton(value=value, description=_desc(name, description)))


def result_chart(fn: Callable[[Any], Figure]) -> Callable[[Any], Figure]:
    """Mark a chart function that draws the explored function's whole result (not only its profile)."""
    fn.takes_result = True
    return fn


def control_values(widget: w.ValueWidget) -> list[Any]:
    """Every value a control's widget can take, in its order."""
    opts = getattr(widget, "_options_values", None)  # SelectionSlider, Dropdown
    if opts is not None:
        return list(opts)
    if isinstance(widget, (w.ToggleButton, w.Checkbox)):
        return [False, True]
    if isinstance(widget, w.IntSlider):
        return list(range(widget.min, widget.max + 1, widget.step))
    raise UsageError(f"cannot list the values of a {type(widget).__name__}")
