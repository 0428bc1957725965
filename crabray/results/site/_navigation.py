"""The scripts that move between episodes: keys, the list as filtered, side by side.

``LIST_SCRIPT`` runs on the pages with an episode list (with the rest of the site's
script). Opening an episode from the list saves the list as it is shown, filtered and
sorted, in the tab's session storage (the "walk": the list's address and its episode
pages in order); keys move a marker through the rows (j, k), open the marked one
(Enter), mark it for side by side (x) and go to the search box (/); a checkbox per row
picks the two episodes the "side by side" button opens.

``EPISODE_SCRIPT`` runs on episode pages and on the side-by-side page. On an episode
page j or the right arrow goes to the next episode, k or the left arrow to the previous
one, u back to the list: of the walk when the page is in it (so the keys follow the
list as filtered), else of the whole list (the page's own previous and next links).
On the side-by-side page it frames the two episode pages named by ``?a=`` and ``?b=``,
after checking each is a page name and nothing else.

Keys typed into a field are text, never moves, and a key with Ctrl, Alt or Meta is the
browser's (Alt+Left is "back"). Storage a browser refuses (privacy settings) loses only
the walk: the keys then follow the whole list.
"""

from __future__ import annotations

_COMMON = """
  var WALK = "crabray-walk";
  function readWalk() {
    try { return JSON.parse(window.sessionStorage.getItem(WALK) || "null"); }
    catch (error) { return null; }
  }
  function saveWalk(walk) {
    try { window.sessionStorage.setItem(WALK, JSON.stringify(walk)); } catch (error) { }
  }
  function lastPart(path) {
    return decodeURIComponent(path.slice(path.lastIndexOf("/") + 1));
  }
  // A field the key is typed into: a text box, a choice list, a text area.
  function entering(target) {
    if (!target || !target.tagName) { return false; }
    var tag = target.tagName;
    return (tag === "INPUT" && target.type !== "checkbox") || tag === "SELECT" ||
      tag === "TEXTAREA" || target.isContentEditable;
  }
  function modified(event) { return event.altKey || event.ctrlKey || event.metaKey; }
"""

LIST_SCRIPT = (
    """
(function () {
  "use strict";
  var form = document.getElementById("episode-filter");
  if (!form) { return; }
"""
    + _COMMON
    + """
  var button = document.getElementById("side-by-side-open");
  var search = document.getElementById("episode-search");
  var picked = [], current = null;
  function rows() {
    var table = document.getElementById("episodes");
    return table ? Array.prototype.slice.call(table.tBodies[0].rows) : [];
  }
  function visible() { return rows().filter(function (row) { return !row.hidden; }); }
  function pageOf(row) {
    var link = row && row.querySelector("a[href]");
    return link ? lastPart(link.getAttribute("href")) : null;
  }
  function listAddress() { return window.location.href.split("#")[0]; }
  function rememberList() {
    saveWalk({list: listAddress(), pages: visible().map(pageOf).filter(Boolean)});
  }
  // From the list, an episode walks the list as shown; from the matrix, the whole list.
  function opening(event) {
    var link = event.target && event.target.closest ? event.target.closest("a[href]") : null;
    if (!link || !/(^|\\/)episodes\\//.test(link.getAttribute("href"))) { return; }
    if (link.closest("#episodes")) { rememberList(); }
    else { try { window.sessionStorage.removeItem(WALK); } catch (error) { } }
  }
  document.addEventListener("click", opening, true);
  document.addEventListener("auxclick", opening, true);

  function showPicks() {
    rows().forEach(function (row) {
      var box = row.querySelector("input.pick");
      if (box) { box.checked = picked.indexOf(pageOf(row)) >= 0; }
    });
    button.disabled = picked.length !== 2;
    button.textContent = picked.length === 2 ? "open the two side by side" :
      "side by side: pick " + (2 - picked.length) + " more";
  }
  function addPicks() {
    rows().forEach(function (row) {
      if (!pageOf(row) || row.querySelector("input.pick")) { return; }
      var box = document.createElement("input");
      box.type = "checkbox";
      box.className = "pick";
      box.title = "pick two episodes to open side by side (key x)";
      box.setAttribute("aria-label", "pick for side by side");
      row.cells[0].insertBefore(box, row.cells[0].firstChild);
    });
    showPicks();
  }
  function pick(row, on) {
    var page = pageOf(row);
    if (!page) { return; }
    picked = picked.filter(function (other) { return other !== page; });
    if (on) {
      picked.push(page);
      if (picked.length > 2) { picked.shift(); }
    }
    showPicks();
  }
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (box.classList && box.classList.contains("pick")) { pick(box.closest("tr"), box.checked); }
  });
  button.addEventListener("click", function () {
    if (picked.length !== 2) { return; }
    function stem(page) { return encodeURIComponent(page.replace(/\\.html$/, "")); }
    window.location.href = "side-by-side.html?a=" + stem(picked[0]) + "&b=" + stem(picked[1]);
  });

  function mark(row) {
    // The keys now work the list: a button or box focused before (clear, a pick) lets go,
    // so Enter opens the marked episode rather than pressing it.
    var focused = document.activeElement;
    if (focused && focused !== document.body && focused.blur) { focused.blur(); }
    if (current) {
      current.classList.remove("current");
      current.removeAttribute("aria-current");
    }
    current = row;
    row.classList.add("current");
    row.setAttribute("aria-current", "true");
    row.scrollIntoView({block: "nearest"});
  }
  function move(step) {
    var shown = visible();
    if (!shown.length) { return; }
    var at = shown.indexOf(current);
    var to = at < 0 ? (step > 0 ? 0 : shown.length - 1) :
      Math.min(Math.max(at + step, 0), shown.length - 1);
    mark(shown[to]);
  }
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (modified(event)) { return; }
    if (event.key === "Escape" && entering(target)) {
      event.preventDefault();
      target.blur();
      return;
    }
    if (entering(target)) { return; }
    var marked = current && !current.hidden && current.isConnected ? current : null;
    if (event.key === "j") { move(1); }
    else if (event.key === "k") { move(-1); }
    else if ((event.key === "Enter" || event.key === "o") && marked && target.tagName !== "A") {
      var link = marked.querySelector("a[href]");
      if (!link) { return; }
      rememberList();
      window.location.href = link.href;
    }
    else if (event.key === "x" && marked) { pick(marked, picked.indexOf(pageOf(marked)) < 0); }
    else if (event.key === "/" && search) { search.focus(); }
    else { return; }
    event.preventDefault();
  });
  // Back on the list it was walked from, the episode last seen is marked.
  function markLastSeen() {
    var walk = readWalk();
    if (!walk || walk.list !== listAddress() || !walk.at) { return; }
    var row = visible().filter(function (candidate) { return pageOf(candidate) === walk.at; })[0];
    if (row) { mark(row); }
  }
  document.addEventListener("crabray:swapped", function () { current = null; addPicks(); });
  addPicks();
  markLastSeen();
})();
"""
)

EPISODE_SCRIPT = (
    """
(function () {
  "use strict";
"""
    + _COMMON
    + """
  function href(id) {
    var link = document.getElementById(id);
    return link && link.tagName === "A" ? link.getAttribute("href") : null;
  }
  function neighbour(id, rel, to, text, none) {
    var element;
    if (to) {
      element = document.createElement("a");
      element.href = to;
      element.rel = rel;
    } else {
      element = document.createElement("span");
      element.className = "muted";
    }
    if (to) { element.id = id; }
    element.textContent = to ? text : none;
    return element;
  }
  function episodePage() {
    var here = lastPart(window.location.pathname);
    var walk = readWalk();
    var pages = walk && Array.isArray(walk.pages) ? walk.pages : [];
    var at = pages.indexOf(here);
    var previous = href("previous-episode"), next = href("next-episode");
    var list = href("list-link");
    if (at >= 0) {
      previous = at > 0 ? pages[at - 1] : null;
      next = at + 1 < pages.length ? pages[at + 1] : null;
      list = walk.list;
      walk.at = here;
      saveWalk(walk);
      document.getElementById("walk").textContent =
        (at + 1) + " of " + pages.length + " in the list as filtered";
      var holder = document.getElementById("neighbours");
      holder.textContent = "";
      holder.appendChild(neighbour("previous-episode", "prev", previous,
        "\\u2039 previous episode", "first of the list"));
      holder.appendChild(document.createTextNode(" "));
      holder.appendChild(neighbour("next-episode", "next", next, "next episode \\u203a",
        "last of the list"));
    }
    document.addEventListener("keydown", function (event) {
      if (modified(event) || event.shiftKey || entering(event.target)) { return; }
      var to;
      if (event.key === "j" || event.key === "ArrowRight") { to = next; }
      else if (event.key === "k" || event.key === "ArrowLeft") { to = previous; }
      else if (event.key === "u") { to = list; }
      else { return; }
      event.preventDefault();
      if (to) { window.location.href = to; }
    });
  }
  // The side-by-side page: each of ?a= and ?b= must be an episode page's name.
  function sideBySide(frames) {
    var NAME = /^[A-Za-z0-9_-]{1,160}$/;
    var params = new URLSearchParams(window.location.search);
    var a = params.get("a"), b = params.get("b");
    if (!a || !b || !NAME.test(a) || !NAME.test(b)) {
      document.getElementById("side-by-side-empty").hidden = false;
      return;
    }
    document.getElementById("side-a").src = "episodes/" + a + ".html";
    document.getElementById("side-b").src = "episodes/" + b + ".html";
    document.getElementById("side-swap").href = "?a=" + b + "&b=" + a;
    document.getElementById("side-a-alone").href = "episodes/" + a + ".html";
    document.getElementById("side-b-alone").href = "episodes/" + b + ".html";
    document.getElementById("side-links").hidden = false;
    frames.hidden = false;
  }
  if (document.getElementById("episode-nav")) { episodePage(); }
  var frames = document.getElementById("side-by-side");
  if (frames) { sideBySide(frames); }
})();
"""
)
