"""The demo's chart: one label and two bars per node, overloaded nodes in red, and the summary
line counting the pods each scheduler put on overloaded nodes."""

import xml.etree.ElementTree as ET

from sandbox.demo_report import Row, render_html, render_svg

SVG = "{http://www.w3.org/2000/svg}"
ROWS = [
    Row("node-1", 0.92, 0.40, overloaded=True, plain=5, loadsched=0),
    Row("node-2", 0.20, 0.30, overloaded=False, plain=3, loadsched=6),
    Row("node-3", 0.10, 0.85, overloaded=True, plain=4, loadsched=1),
]


def test_the_chart_is_a_standalone_svg_with_a_bar_per_scheduler_and_node() -> None:
    root = ET.fromstring(render_svg(ROWS))
    assert root.tag == f"{SVG}svg"
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert "pods on overloaded nodes (red): plain 9 of 12 · with loadsched 1 of 12" in texts
    labels = {
        t.text: t.get("fill") for t in root.iter(f"{SVG}text") if (t.text or "").startswith("node-")
    }
    assert labels == {
        "node-1  cpu 92% · mem 40%": "#c0392b",
        "node-2  cpu 20% · mem 30%": "#2c3e50",
        "node-3  cpu 10% · mem 85%": "#c0392b",
    }
    bars = [r for r in root.iter(f"{SVG}rect") if r.get("height") == "16"]
    assert len(bars) == 2 * len(ROWS)
    # the longest bar is the largest count (6), the others in proportion
    widths = [float(r.get("width", "0")) for r in bars]
    assert widths.index(max(widths)) == 3 and widths[1] == 0.0
    assert abs(widths[0] / widths[3] - 5 / 6) < 1e-6
    height = int(root.get("height", "0"))
    assert all(float(r.get("y", "0")) + 16 <= height for r in bars)


def test_the_page_holds_the_chart() -> None:
    page = render_html(ROWS)
    assert page.startswith("<!doctype html>") and render_svg(ROWS) in page
