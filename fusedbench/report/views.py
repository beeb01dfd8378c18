"""A figure's views switched by keyboard: plotly's dropdowns are drawn in SVG, out of the tab order and out of reach
of a screen reader, so the page renders each as a native <select> beside the figure instead, and a few lines of
script (`VIEW_SCRIPT`) apply the chosen view's restyle and relayout through
`Plotly.update`, as the dropdown's button would have. The figures keep their `updatemenus` (where the views are
defined and tested); only their HTML loses them."""

from __future__ import annotations

import html
import re

import plotly.graph_objects as go
from plotly.io.json import to_json_plotly

from fusedbench.report.figures import VIEW_GROUP

VIEW_SCRIPT = """
document.querySelectorAll('select[data-figure]').forEach(function (select) {
  select.addEventListener('change', function () {
    var view = JSON.parse(document.getElementById(select.dataset.views).textContent)[select.selectedIndex];
    Plotly.update(select.dataset.figure, view[0], view[1]);
    var title = view[1]['title.text'];  // what a screen reader names the figure by: the view's title, as text
    if (title) {
      var text = title.replace(/<[^>]+>/g, ' ').replace(/\\s+/g, ' ').trim();
      select.closest('[role=figure]').setAttribute('aria-label', text);
    }
  });
});
"""


def figure_label(figure: go.Figure, div_id: str) -> str:
    """What a screen reader says for the figure: its title as text (its id where it has none)."""
    title = figure.layout.title.text or div_id
    return " ".join(re.sub(r"<[^>]+>", " ", title).split())


def take_view_selects(figure: go.Figure, div_id: str) -> str:
    """The figure's dropdowns as labelled <select>s bound to its div, removed from the figure (which is about to be
    written as HTML and not used again)."""
    selects = []
    for index, menu in enumerate(figure.layout.updatemenus):
        views = to_json_plotly([list(button.args) for button in menu.buttons]).replace("</", "<\\/")
        options = _options([button.label for button in menu.buttons])
        ident = f"{div_id}-view{index if index else ''}"
        selects.append(
            f"<label class='view' for='{ident}'>View: </label><select id='{ident}' data-figure='{div_id}' "
            f"data-views='{ident}-data'>{options}</select>"
            f"<script type='application/json' id='{ident}-data'>{views}</script>"  # as is: no escaping to bloat it
        )
    figure.layout.updatemenus = ()
    return f"<div class='views'>{''.join(selects)}</div>" if selects else ""


def _options(labels: list[str]) -> str:
    """A <select>'s options in the order of the views, those labelled 'group: view' (`VIEW_GROUP`) under an
    <optgroup> of each run of one group, each option its whole label (the closed <select> shows the option alone:
    'fused over unfused' would not say of which dtype)."""
    options, group = [], None
    for label in labels:
        head, sep, _ = label.partition(VIEW_GROUP)
        if sep and head != group:
            options.append(("</optgroup>" if group else "") + f"<optgroup label='{html.escape(head)}'>")
        elif not sep and group:
            options.append("</optgroup>")
        group = head if sep else None
        options.append(f"<option>{html.escape(label)}</option>")
    return "".join(options) + ("</optgroup>" if group else "")
