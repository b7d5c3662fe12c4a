"""Layout checks of matplotlib figures on what a PNG render really draws: texts that leave the
figure (cut off in the file) and texts drawn over each other.

``record_texts()`` watches every Agg render while it is active (a report writing its PNGs, or
``render(fig)``), so a check costs no render of its own; ``assert_readable(fig, records)``
then judges one figure."""
import contextlib
import io
from unittest import mock

from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.text import Text

#: Pixels a text may stick out or overlap by (antialiasing, rounding of extents).
TOLERANCE = 1.0


def root_figure(obj):
    """The top-level Figure of an Artist, an Axes, a SubFigure or a Figure."""
    fig = getattr(obj, "figure", obj)
    return getattr(fig, "figure", fig)


@contextlib.contextmanager
def record_texts():
    """Record, per figure, each non-empty text an Agg render draws and its extent, with the
    figure's box at that moment: ``{id(figure): {id(text): (text, extent, figure box)}}``."""
    records = {}
    original = Text.draw

    def draw(self, renderer):
        result = original(self, renderer)
        if isinstance(renderer, RendererAgg) and self.get_visible() and self.get_text().strip():
            fig = root_figure(self)
            records.setdefault(id(fig), {})[id(self)] = (self, self.get_window_extent(renderer),
                                                         fig.bbox.frozen())
        return result

    with mock.patch.object(Text, "draw", draw):
        yield records


def render(fig) -> dict:
    """Render ``fig`` to PNG (in memory) and return its records."""
    fig = root_figure(fig)
    with record_texts() as records:
        fig.savefig(io.BytesIO(), format="png", dpi=100)
    return records


def texts_outside(fig, records) -> list:
    """The drawn texts of ``fig`` that do not lie inside it."""
    return [t.get_text() for t, b, box in records[id(root_figure(fig))].values()
            if b.x0 < box.x0 - TOLERANCE or b.y0 < box.y0 - TOLERANCE
            or b.x1 > box.x1 + TOLERANCE or b.y1 > box.y1 + TOLERANCE]


def _slanted_ticks(fig) -> dict:
    """id of each slanted tick label -> id of its axis: the boxes of neighbouring slanted labels
    overlap even where their letters do not, so those pairs are not compared."""
    out = {}
    for ax in root_figure(fig).get_axes():
        for axis in (ax.xaxis, ax.yaxis):
            for t in axis.get_ticklabels():
                if t.get_rotation() % 90:
                    out[id(t)] = id(axis)
    return out


def overlapping_texts(fig, records) -> list:
    """Pairs of drawn texts of ``fig`` whose boxes intersect (by more than the tolerance)."""
    texts = list(records[id(root_figure(fig))].values())
    slanted = _slanted_ticks(fig)
    pairs = []
    for i, (a, ba, _) in enumerate(texts):
        for b, bb, _ in texts[i + 1:]:
            if id(a) in slanted and slanted.get(id(a)) == slanted.get(id(b)):
                continue
            if (min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > TOLERANCE
                    and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > TOLERANCE):
                pairs.append((a.get_text(), b.get_text()))
    return pairs


def assert_readable(fig, records=None, name: str = "figure") -> None:
    """Every drawn text inside the figure, and no two drawn texts on top of each other
    (``records`` from :func:`record_texts`; rendered here when not given)."""
    records = render(fig) if records is None else records
    assert id(root_figure(fig)) in records, f"{name}: not rendered"
    outside = texts_outside(fig, records)
    assert not outside, f"{name}: texts cut off at the figure's edge: {outside}"
    overlaps = overlapping_texts(fig, records)
    assert not overlaps, f"{name}: texts drawn over each other: {overlaps}"
