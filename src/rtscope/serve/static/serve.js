/* rtscope serve's pages (served after the report's rtsDrawPlots): draw each plot from its JSON block, follow the store through server-sent events
   (a stored run or interval re-renders the page's content in place; a page that cannot change any more — a run, a finished experiment,
   body[data-static] — opens no stream, and one whose fresh copy says so closes its own), and show any script error on the page
   (also kept in body[data-js-errors], which the browser tests read). */
(function () {
  "use strict";
  window.rtsErrors = [];
  function banner(text, kind) {
    var box = document.getElementById("rts-errors");
    if (!box) { return; }
    box.className = kind || "";
    box.style.display = text ? "block" : "none";
    box.textContent = text || "";
  }
  window.rtsReportError = function (msg) {
    window.rtsErrors.push(String(msg));
    banner("Page error: " + window.rtsErrors.join("; "), "error");
    if (document.body) { document.body.setAttribute("data-js-errors", String(window.rtsErrors.length)); }
  };
  window.addEventListener("error", function (e) { window.rtsReportError(e.message || "script error"); });

  function drawAll() {   /* rtsDrawPlots: the report's own (report/template.py), served before this script */
    var divs = document.querySelectorAll("main div.plot");
    document.body.setAttribute("data-plots", String(divs.length));
    rtsDrawPlots(divs);
  }

  var busy = false, again = false, events = null;
  function stop() {   /* the page cannot change any more: no stream */
    if (events) { events.close(); events = null; }
    document.body.setAttribute("data-static", "");
    document.body.setAttribute("data-live", "off");
  }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, {credentials: "same-origin", cache: "no-store"}).then(function (response) {
      if (response.status === 503) { banner("The store cannot be reached; this page follows it again when it is back.", "warn"); return null; }
      if (!response.ok) { return null; }
      /* made from an earlier state while the newest was still being made (a burst of intervals): ask again */
      if (response.headers.get("X-Rtscope-Stale")) { window.setTimeout(refresh, 1000); }
      return response.text();
    }).then(function (text) {
      if (text === null) { return; }
      var doc = new DOMParser().parseFromString(text, "text/html"), fresh = doc.getElementById("main");
      var main = document.getElementById("main");
      if (!fresh || !main) { return; }
      if (typeof Plotly !== "undefined") { main.querySelectorAll("div.plot").forEach(function (d) { Plotly.purge(d); }); }
      main.innerHTML = fresh.innerHTML;
      banner("", "");
      document.body.setAttribute("data-updates", String(Number(document.body.getAttribute("data-updates")) + 1));
      drawAll();
      sortable();
      if (doc.body && doc.body.hasAttribute("data-static")) { stop(); }
    }).catch(function (err) {
      banner("Could not follow the store: " + err, "warn");
    }).then(function () {
      busy = false;
      if (again) { again = false; refresh(); }
    });
  }

  function follow() {
    if (typeof EventSource === "undefined" || !document.getElementById("main") || document.body.hasAttribute("data-static")) { return; }
    events = new EventSource("/events");
    events.addEventListener("hello", function () { document.body.setAttribute("data-live", "on"); });
    events.addEventListener("change", refresh);
    events.addEventListener("unavailable", function () {
      banner("The store cannot be reached; this page follows it again when it is back.", "warn");
    });
    events.onerror = function () { document.body.setAttribute("data-live", "reconnecting"); };
  }

  /* table.sortable: a click on a heading sorts its rows by that column (numbers by their data-sort value), a
     second click reverses; the order chosen stays when the page follows the store. */
  var sorted = {};
  function sortTable(table) {
    var how = sorted[table.id], body = table.tBodies[0];
    if (!how || !body) { return; }
    var rows = Array.prototype.slice.call(body.rows);
    function key(row) {
      var cell = row.cells[how.column], raw = cell.getAttribute("data-sort");
      return raw !== null ? (raw === "" ? -Infinity : Number(raw)) : cell.textContent.trim().toLowerCase();
    }
    rows.sort(function (a, b) { var x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * how.direction; });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  function sortable() {
    document.querySelectorAll("table.sortable").forEach(function (table) {
      table.querySelectorAll("thead th").forEach(function (th, column) {
        th.style.cursor = "pointer";
        th.addEventListener("click", function () {
          var how = sorted[table.id];
          sorted[table.id] = {column: column, direction: how && how.column === column ? -how.direction : 1};
          sortTable(table);
        });
      });
      sortTable(table);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    sortable();
    document.body.setAttribute("data-js-errors", String(window.rtsErrors.length));
    drawAll();
    follow();
  });
})();
