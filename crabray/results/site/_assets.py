"""The site's stylesheet and script, inlined into every page so a page needs no other file.

The script is the only one any page runs. Pages allow it by its SHA-256 hash
in their Content-Security-Policy, so a ``<script>`` that slipped through
escaping (task text and agent output are untrusted) would still not execute.
"""

from __future__ import annotations

import base64
import hashlib

CSS = """
:root { color-scheme: light; --fg: #1d232b; --muted: #5c6670; --line: #d8dde3;
  --bg-alt: #f4f6f8; --ok: #1a7f37; --ok-bg: #dcf5e3; --bad: #b42318; --bad-bg: #fde7e4;
  --accent: #0b5cad; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  margin: 0 auto; padding: 1.2rem 1.5rem 3rem; max-width: 1400px; }
h1 { font-size: 1.5rem; margin: 0 0 .3rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .6rem; border-bottom: 1px solid var(--line);
  padding-bottom: .2rem; }
h3 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
a { color: var(--accent); }
.muted { color: var(--muted); }
nav { margin-bottom: 1rem; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; margin: .4rem 0 1rem; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: .3rem .6rem; text-align: left;
  vertical-align: top; white-space: nowrap; }
td.num, th.num { text-align: right; }
tbody tr:nth-child(even) { background: var(--bg-alt); }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th::after { content: " \\2195"; color: #aab2ba; font-size: .8em; }
table.sortable th[aria-sort="ascending"]::after { content: " \\25B2"; color: var(--fg); }
table.sortable th[aria-sort="descending"]::after { content: " \\25BC"; color: var(--fg); }
.ok { color: var(--ok); font-weight: 600; }
.bad { color: var(--bad); font-weight: 600; }
.plots { display: flex; flex-wrap: wrap; gap: 1rem; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: .5rem;
  background: #fff; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: .9em; max-width: 520px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
pre { background: var(--bg-alt); border: 1px solid var(--line); border-radius: 4px;
  padding: .5rem .7rem; overflow-x: auto; white-space: pre-wrap; word-break: break-word;
  margin: .2rem 0 .6rem; max-height: 32rem; }
.step { border: 1px solid var(--line); border-radius: 6px; padding: .4rem 1rem 1rem;
  margin: 1rem 0; }
.call { border-left: 3px solid var(--line); padding-left: .8rem; margin: .6rem 0; }
.call.failed { border-left-color: var(--bad); }
.label { color: var(--muted); font-size: .85em; text-transform: uppercase;
  letter-spacing: .04em; margin-top: .5rem; }
img.screenshot { max-width: 100%; border: 1px solid var(--line); border-radius: 4px; }
.tag { display: inline-block; background: var(--bg-alt); border: 1px solid var(--line);
  border-radius: 3px; padding: 0 .35rem; margin-right: .25rem; font-size: .9em; }
svg.graph .node text { font: 12px system-ui, sans-serif; fill: var(--fg); }
svg.graph .edge { stroke: #8a939c; stroke-width: 1.3; fill: none; }
svg.graph .arrow { fill: #8a939c; }
"""

SCRIPT = """
(function () {
  "use strict";
  function sortKey(cell) {
    var raw = cell.getAttribute("data-sort");
    return raw === null ? cell.textContent.trim() : raw;
  }
  function compare(a, b) {
    var blankA = a === "", blankB = b === "";
    if (blankA || blankB) { return blankA === blankB ? 0 : (blankA ? 1 : -1); }
    var x = Number(a), y = Number(b);
    if (!isNaN(x) && !isNaN(y)) { return x - y; }
    return a.localeCompare(b, undefined, {numeric: true, sensitivity: "base"});
  }
  function sortBy(table, header, index) {
    var descending = header.getAttribute("aria-sort") === "ascending";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (row, position) {
      return {row: row, key: sortKey(row.cells[index]), position: position};
    });
    rows.sort(function (p, q) {
      var order = compare(p.key, q.key);
      if (order !== 0 && (p.key === "" || q.key === "")) { return order; }
      if (descending) { order = -order; }
      return order !== 0 ? order : p.position - q.position;
    });
    rows.forEach(function (item) { body.appendChild(item.row); });
    Array.prototype.forEach.call(header.parentNode.cells, function (cell) {
      cell.removeAttribute("aria-sort");
    });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, index) {
      header.setAttribute("title", "Sort by " + header.textContent.trim());
      header.addEventListener("click", function () { sortBy(table, header, index); });
    });
  });
})();
"""


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        f"script-src {_csp_hash(SCRIPT)}",
        # matplotlib's SVG and our own carry style attributes.
        "style-src 'unsafe-inline'",
        # Screenshots are files beside the page; file: covers opening the site from disk.
        "img-src 'self' file: data:",
        "base-uri 'none'",
        "form-action 'none'",
    )
)
"""What a page may load: nothing from the network, and only the script above."""
