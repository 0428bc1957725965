"""The site's stylesheet and scripts, inlined into the pages so a page needs no other file.

The index, run and comparison pages' script sorts tables, draws the two-run
comparison from the page's JSON data block, filters the episode list, moves
through it by key (``_navigation``), and on pages served by ``crabray view``
polls ``live.json``: when the dataset's version changes it fetches the page
again and swaps every ``data-live-section`` in place (sort order kept), so the
reader keeps their place. Episode pages and the side-by-side page run the
smaller ``EPISODE_SCRIPT`` (keys; the two frames). These two are the only
scripts any page runs. Pages allow them by their SHA-256 hashes in their
Content-Security-Policy, so a ``<script>`` that slipped through escaping (task
text and agent output are untrusted) would still not execute.
"""

from __future__ import annotations

import base64
import hashlib

from crabray.results.site._navigation import EPISODE_SCRIPT, LIST_SCRIPT

__all__ = ["CONTENT_SECURITY_POLICY", "CSS", "EPISODE_SCRIPT", "FRAMING_POLICY", "SCRIPT"]

CSS = """
:root { color-scheme: light; --fg: #1d232b; --muted: #5c6670; --line: #d8dde3;
  --bg-alt: #f4f6f8; --ok: #1a7f37; --ok-bg: #dcf5e3; --bad: #b42318; --bad-bg: #fde7e4;
  --accent: #0b5cad; --error: #6a3d9a; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  margin: 0 auto; padding: 1.2rem 1.5rem 3rem; }
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
.warn { color: var(--error); font-weight: 600; }
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
header p { margin: .2rem 0; }
#description { font-size: 1.05em; }
#run-picker { display: flex; flex-wrap: wrap; gap: .3rem .5rem; align-items: baseline;
  margin: .8rem 0; }
#run-picker a { border: 1px solid var(--line); border-radius: 4px; padding: .1rem .45rem;
  text-decoration: none; }
#run-picker a.current { background: var(--accent); color: #fff; border-color: var(--accent); }
#run-picker a.current .muted { color: #e6eef8; }
#live-status { font-size: .9em; }
#live-status.updated { color: var(--ok); }
table#matrix td.matrix-cell { text-align: center; min-width: 6rem; }
table#matrix td.matrix-cell a { font-weight: 600; color: var(--fg); text-decoration: none;
  display: block; }
table#matrix th[scope=row] { font-weight: 500; }
.small { font-size: .8em; }
.drill { display: none; border: 1px solid var(--line); border-radius: 6px;
  padding: .2rem 1rem .6rem; margin: .6rem 0; background: var(--bg-alt); }
.drill:target, .drill.open { display: block; }
.drill .close { font-size: .8em; font-weight: normal; margin-left: .6rem; }
.episode-body.with-conversation { display: grid; grid-template-columns: minmax(0, 1fr)
  minmax(0, 1fr); gap: 1.5rem; align-items: start; }
@media (max-width: 1000px) { .episode-body.with-conversation { display: block; } }
.message { border: 1px solid var(--line); border-radius: 6px; padding: .3rem .7rem;
  margin: .5rem 0; }
.message.role-assistant { border-left: 4px solid var(--accent); }
.message.role-tool { border-left: 4px solid #8a939c; }
.message.role-user { border-left: 4px solid #c9a227; }
.message-head .role { font-weight: 600; text-transform: uppercase; font-size: .8em;
  letter-spacing: .04em; }
.message-head .speaker { background: var(--bg-alt); border-radius: 3px; padding: 0 .3rem;
  font-size: .85em; }
.message-head .usage { float: right; font-size: .85em; }
.tool-call code.tool-name { font-weight: 600; }
.label .muted { text-transform: none; letter-spacing: 0; }
tr.change-better td, tr.change-fixed td { background: var(--ok-bg); }
tr.change-worse td, tr.change-broke td { background: var(--bad-bg); }
tr.change-only td { color: var(--muted); }
form.filters { display: flex; flex-wrap: wrap; gap: .4rem .9rem; align-items: baseline;
  margin: .4rem 0 .6rem; }
form.filters input[type=search] { width: 18rem; max-width: 100%; }
form.filters select { max-width: 16rem; }
.drill h3, h1 { overflow-wrap: anywhere; }
#episodes-section .table-wrap { max-height: 80vh; overflow: auto; }
#episodes-section thead th { position: sticky; top: 0; background: #fff; z-index: 1; }
.graph-progress { overflow-x: auto; max-width: 100%; }
ol.graph-nodes { margin: .3rem 0 1rem; padding-left: 1.8rem; }
ol.graph-nodes li { margin: .15rem 0; }
ol.graph-nodes code { white-space: pre-wrap; word-break: break-word; }
ol.graph-nodes li.passed code { color: var(--ok); }
nav.neighbours { display: flex; gap: 1rem; align-items: baseline; flex-wrap: wrap; }
details.logs { border: 1px solid var(--line); border-radius: 6px; padding: .3rem .7rem;
  margin: .5rem 0; }
details.logs > summary { cursor: pointer; font-weight: 600; }
details.output > summary { cursor: pointer; }
dl.facts dd { overflow-wrap: anywhere; }
.why { border: 1px solid var(--line); border-left: 6px solid var(--muted); border-radius: 6px;
  padding: .5rem 1rem .3rem; margin: .6rem 0 .8rem; }
.why.outcome-pass { border-left-color: var(--ok); }
.why.outcome-fail { border-left-color: var(--bad); }
.why.outcome-error { border-left-color: var(--error); }
.why-head { display: flex; flex-wrap: wrap; gap: .2rem .7rem; align-items: baseline; }
.why-head p { margin: .1rem 0; }
.badge { display: inline-block; color: #fff; font-weight: 700; text-transform: uppercase;
  letter-spacing: .05em; border-radius: 4px; padding: .1rem .55rem; font-size: .9em; }
.badge-pass { background: var(--ok); }
.badge-fail { background: var(--bad); }
.badge-error { background: var(--error); }
.attribution-name { font-weight: 600; border: 1px solid var(--line); border-radius: 3px;
  padding: 0 .35rem; }
#cause { display: grid; grid-template-columns: repeat(auto-fit, minmax(24rem, 1fr));
  gap: 0 1.4rem; margin-top: .3rem; }
#cause > div { min-width: 0; }
#cause p { margin: .15rem 0 .4rem; }
#cause pre { max-height: 16em; overflow: auto; margin-bottom: .4rem; }
#cause p.said { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 4.4em;
  overflow: auto; }
#cause .tail-note { font-size: .85em; }
#peers { margin: 0 0 .8rem; }
#peers .label { display: inline; margin-right: .3rem; }
pre.description { max-height: 10em; overflow: auto; }
#keys, #walk { font-size: .85em; }
kbd { border: 1px solid var(--line); border-bottom-width: 2px; border-radius: 3px;
  padding: 0 .3rem; font: .85em ui-monospace, monospace; background: var(--bg-alt); }
details.metadata { margin-top: 2rem; }
details.metadata > summary { cursor: pointer; font-size: 1.2rem; font-weight: 600; }
#episodes tr.current td { background: #fff3bf; }
#episodes tr.current td:first-child { box-shadow: inset 4px 0 0 var(--accent); }
#episodes input.pick { margin: 0 .4rem 0 0; vertical-align: middle; }
.side-nav { display: flex; flex-wrap: wrap; gap: .3rem 1rem; align-items: baseline; }
#side-by-side { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: .6rem; }
#side-by-side iframe { width: 100%; height: calc(100vh - 4.5rem); border: 1px solid var(--line);
  border-radius: 6px; background: #fff; }
#side-by-side[hidden] { display: none; }
body.framing { padding: .6rem .8rem; }
body.framing nav { margin-bottom: .5rem; }
"""

FILTER_SCRIPT = """
(function () {
  "use strict";
  // The episode list's search box and filters: rows carry data-outcome, data-attribution,
  // data-agent, data-task, data-tag (a JSON list: a filter with data-multi matches any of
  // its values), data-ended and data-search (lower-cased text: task, agent, error,
  // instruction); a row shows when it matches every filter and every word searched.
  var form = document.getElementById("episode-filter");
  if (!form) { return; }
  var search = document.getElementById("episode-search");
  var selects = Array.prototype.slice.call(form.querySelectorAll("select[data-filter]"));
  function rows() {
    var table = document.getElementById("episodes");
    return table ? Array.prototype.slice.call(table.tBodies[0].rows) : [];
  }
  function values(row, select) {
    var raw = row.getAttribute("data-" + select.getAttribute("data-filter")) || "";
    if (!select.hasAttribute("data-multi")) { return [raw]; }
    try {
      var list = JSON.parse(raw || "[]");
      return Array.isArray(list) ? list.map(String) : [];
    } catch (error) { return []; }
  }
  function fillChoices() {
    var all = rows();
    selects.forEach(function (select) {
      var chosen = select.value, seen = {};
      all.forEach(function (row) {
        values(row, select).forEach(function (value) { seen[value] = true; });
      });
      if (chosen) { seen[chosen] = true; }
      while (select.options.length > 1) { select.remove(1); }
      Object.keys(seen).sort().forEach(function (value) {
        select.appendChild(new Option(value === "" ? "(none)" : value, value));
      });
      select.value = chosen;
    });
  }
  function apply() {
    var words = search.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var all = rows(), shown = 0;
    all.forEach(function (row) {
      var text = row.getAttribute("data-search") || "";
      var match = words.every(function (word) { return text.indexOf(word) >= 0; }) &&
        selects.every(function (select) {
          return select.value === "" || values(row, select).indexOf(select.value) >= 0;
        });
      row.hidden = !match;
      if (match) { shown += 1; }
    });
    document.getElementById("filter-count").textContent = shown === all.length ?
      all.length + " episodes" : shown + " of " + all.length + " episodes shown";
  }
  // The filter is kept for the tab's session, per page: back from an episode's page, the
  // list is as it was left. Storage a browser refuses (privacy settings) only loses that.
  var key = "crabray-filter:" + window.location.pathname;
  function save() {
    var state = {search: search.value};
    selects.forEach(function (select) { state[select.id] = select.value; });
    try { window.sessionStorage.setItem(key, JSON.stringify(state)); } catch (error) { }
  }
  function restore() {
    var state = null;
    try { state = JSON.parse(window.sessionStorage.getItem(key) || "null"); } catch (error) { }
    if (!state) { return; }
    search.value = state.search || "";
    selects.forEach(function (select) {
      var value = state[select.id] || "";
      if (value && !Array.prototype.some.call(select.options, function (option) {
        return option.value === value;
      })) { select.appendChild(new Option(value, value)); }
      select.value = value;
    });
  }
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  function update() { apply(); save(); }
  form.addEventListener("input", update);
  form.addEventListener("change", update);
  // A reset would clear the fields only after its event: clear them here and filter at
  // once, so the list and the fields never disagree.
  form.addEventListener("reset", function (event) {
    event.preventDefault();
    search.value = "";
    selects.forEach(function (select) { select.value = ""; });
    update();
  });
  document.addEventListener("crabray:swapped", function () { fillChoices(); apply(); });
  fillChoices();
  restore();
  apply();
  form.hidden = false;
})();
"""

SCRIPT = (
    """
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
  function makeSortable(root) {
    root.querySelectorAll("table.sortable").forEach(function (table) {
      if (!table.tHead || !table.tBodies.length) { return; }
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, index) {
        header.setAttribute("title", "Sort by " + header.textContent.trim());
        header.addEventListener("click", function () { sortBy(table, header, index); });
      });
    });
  }
  makeSortable(document);

  function sortState(section) {
    var state = [];
    section.querySelectorAll("table.sortable").forEach(function (table) {
      if (!table.tHead) { return; }
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, index) {
        var order = header.getAttribute("aria-sort");
        if (order) { state.push({id: table.id, index: index, order: order}); }
      });
    });
    return state;
  }
  function restoreSort(state) {
    state.forEach(function (item) {
      var table = document.getElementById(item.id);
      if (!table || !table.tHead) { return; }
      var header = table.tHead.rows[0].cells[item.index];
      if (!header) { return; }
      sortBy(table, header, item.index);
      if (item.order === "descending") { sortBy(table, header, item.index); }
    });
  }
  function swapSections(text) {
    var fresh = new DOMParser().parseFromString(text, "text/html");
    fresh.querySelectorAll("[data-live-section]").forEach(function (incoming) {
      var current = document.getElementById(incoming.id);
      if (current) {
        var state = sortState(current);
        current.innerHTML = incoming.innerHTML;
        makeSortable(current);
        restoreSort(state);
      } else {
        var main = document.querySelector("main");
        if (main) { main.appendChild(document.importNode(incoming, true)); }
      }
    });
    var picker = fresh.getElementById("run-picker");
    var mine = document.getElementById("run-picker");
    if (picker && mine) { mine.innerHTML = picker.innerHTML; }
    openTarget();
    document.dispatchEvent(new Event("crabray:swapped"));
  }
  // A drill-down opens by CSS :target; a swapped-in element is not re-matched, so the
  // open one is also marked with a class, kept in step with the address's fragment.
  function openTarget() {
    document.querySelectorAll(".drill.open").forEach(function (drill) {
      drill.classList.remove("open");
    });
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id ? document.getElementById(id) : null;
    if (target && target.classList.contains("drill")) { target.classList.add("open"); }
  }
  window.addEventListener("hashchange", openTarget);
  function poll(body) {
    var url = body.getAttribute("data-live");
    var status = document.getElementById("live-status");
    fetch(url, {cache: "no-store"}).then(function (response) {
      return response.json();
    }).then(function (live) {
      if (live.version === body.getAttribute("data-version")) { return null; }
      return fetch(window.location.pathname, {cache: "no-store"}).then(function (response) {
        return response.text();
      }).then(function (text) {
        swapSections(text);
        body.setAttribute("data-version", live.version);
        if (status) {
          status.textContent = "live: " + live.episodes + " episodes, updated " +
            new Date().toLocaleTimeString();
          status.className = "muted updated";
        }
      });
    }).catch(function (error) {
      if (status) { status.textContent = "live updates paused: " + error; }
    }).then(function () {
      window.setTimeout(function () { poll(body); }, POLL_MS);
    });
  }
  var POLL_MS = 2000;
  if (document.body.hasAttribute("data-live") && /^https?:$/.test(window.location.protocol)) {
    window.setTimeout(function () { poll(document.body); }, POLL_MS);
  }

  function fillCompare(data) {
    var a = document.getElementById("run-a"), b = document.getElementById("run-b");
    var runs = data.runs;
    if (runs.length < 2) {
      document.getElementById("compare-empty").hidden = false;
      return;
    }
    runs.forEach(function (run) {
      a.appendChild(new Option(run, run));
      b.appendChild(new Option(run, run));
    });
    var params = new URLSearchParams(window.location.search);
    a.value = runs.indexOf(params.get("a")) >= 0 ? params.get("a") : runs[1];
    b.value = runs.indexOf(params.get("b")) >= 0 ? params.get("b") : runs[0];
    function draw() {
      var left = data.scores[a.value] || {}, right = data.scores[b.value] || {};
      var keys = Object.keys(left).concat(Object.keys(right).filter(function (key) {
        return !(key in left);
      })).sort();
      var body = document.querySelector("#comparison tbody");
      body.textContent = "";
      var counts = {};
      keys.forEach(function (key) {
        var x = left[key], y = right[key], change, diff = "";
        if (!x) { change = "only in B"; } else if (!y) { change = "only in A"; } else {
          var d = y[0] - x[0];
          diff = (d > 0 ? "+" : "") + d.toFixed(2);
          if (x[1] === 0 && y[1] > 0) { change = "fixed"; }
          else if (x[1] > 0 && y[1] === 0) { change = "broke"; }
          else if (d > 1e-9) { change = "better"; }
          else if (d < -1e-9) { change = "worse"; }
          else { change = "same"; }
        }
        counts[change] = (counts[change] || 0) + 1;
        var row = body.insertRow();
        row.className = "change-" + (change.indexOf("only") === 0 ? "only" : change);
        [key, x ? x[0].toFixed(2) : "", y ? y[0].toFixed(2) : "", diff, change].forEach(
          function (text, index) {
            var cell = row.insertCell();
            cell.textContent = text;
            if (index > 0 && index < 4) { cell.className = "num"; }
          });
      });
      document.getElementById("compare-summary").textContent = a.value + " \u2192 " +
        b.value + ": " + Object.keys(counts).sort().map(function (name) {
          return counts[name] + " " + name;
        }).join(", ");
    }
    a.addEventListener("change", draw);
    b.addEventListener("change", draw);
    draw();
  }
  var compareData = document.getElementById("compare-data");
  if (compareData) { fillCompare(JSON.parse(compareData.textContent)); }
})();
"""
    + FILTER_SCRIPT
    + LIST_SCRIPT
)


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        f"script-src {_csp_hash(SCRIPT)} {_csp_hash(EPISODE_SCRIPT)}",
        # matplotlib's SVG and our own carry style attributes.
        "style-src 'unsafe-inline'",
        # Screenshots are files beside the page; file: covers opening the site from disk.
        "img-src 'self' file: data:",
        # The served pages poll live.json on their own server.
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
    )
)
"""What a page may load: nothing from the network, and only the two scripts above."""
FRAMING_POLICY = CONTENT_SECURITY_POLICY + "; frame-src 'self' file:"
"""The side-by-side page's policy: the same, and it may frame the site's own pages (file:
when the site is opened from disk)."""
