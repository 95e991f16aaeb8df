// venturi dashboard: the theme toggle, the refresh of live pages, the selection of rows.
// A file of the dashboard's own (the Content-Security-Policy allows 'self' scripts only,
// nothing inline); every page works without it, only less comfortably.
(function () {
  "use strict";
  var doc = document.documentElement;
  var rootMeta = document.querySelector('meta[name="venturi-root"]');
  var root = rootMeta ? rootMeta.getAttribute("content") : "/";

  function store(key, value) {
    try {
      if (value === null) { window.localStorage.removeItem(key); }
      else { window.localStorage.setItem(key, value); }
    } catch (e) { /* storage refused: the choice lasts for this page only */ }
  }
  function stored(key) {
    try { return window.localStorage.getItem(key); } catch (e) { return null; }
  }

  // --- theme: the system's setting, or the one chosen here (a cookie, so that the
  // server renders the page in it and nothing flashes) ----------------------------------
  var THEMES = ["system", "dark", "light"];
  function setTheme(theme) {
    var path = "; path=" + root + "; SameSite=Strict";
    if (theme === "system") {
      doc.removeAttribute("data-theme");
      document.cookie = "venturi_theme=" + path + "; max-age=0";
    } else {
      doc.setAttribute("data-theme", theme);
      document.cookie = "venturi_theme=" + theme + path + "; max-age=31536000";
    }
    var button = document.getElementById("theme-toggle");
    if (button) { button.textContent = "theme: " + theme; }
  }
  function initTheme() {
    var button = document.getElementById("theme-toggle");
    if (!button) { return; }
    button.addEventListener("click", function () {
      var now = doc.getAttribute("data-theme") || "system";
      setTheme(THEMES[(THEMES.indexOf(now) + 1) % THEMES.length]);
    });
  }

  // --- refresh: a live page reloads its #live part every few seconds, unless paused,
  // hidden, or the operator is selecting rows or typing in it ---------------------------
  var timer = null;
  function interval() {
    var select = document.getElementById("refresh-interval");
    return select ? parseInt(select.value, 10) : 5;
  }
  function paused() { return stored("venturi-refresh-paused") === "1"; }
  function busy(live) {
    if (document.hidden) { return true; }
    if (live.querySelector("input[name=ids]:checked")) { return true; }
    if (live.querySelector("details.confirm[open]")) { return true; }
    var active = document.activeElement;
    return active !== null && active !== document.body && live.contains(active) &&
      (active.tagName === "INPUT" || active.tagName === "SELECT" || active.tagName === "TEXTAREA");
  }
  function showStatus(text) {
    var status = document.getElementById("refresh-status");
    if (status) { status.textContent = text; }
  }
  function refresh() {
    // Every tick counts, paused or not: a test (or a curious operator) can see time pass.
    window.venturiTicks = (window.venturiTicks || 0) + 1;
    var live = document.getElementById("live");
    if (!live || paused()) { return schedule(); }
    if (busy(live)) { showStatus("(waiting: rows selected)"); return schedule(); }
    var source = live.getAttribute("data-refresh") || window.location.href;
    fetch(source, { credentials: "same-origin", headers: { "X-Venturi-Refresh": "1" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        var current = document.getElementById("live");
        if (fresh && current && !busy(current)) {
          current.replaceWith(document.importNode(fresh, true));
          initSelection();
          showStatus("updated " + new Date().toLocaleTimeString());
        }
      })
      .catch(function (error) { showStatus("refresh failed: " + error.message); })
      .then(schedule);
  }
  function schedule() {
    if (timer !== null) { window.clearTimeout(timer); }
    timer = window.setTimeout(refresh, interval() * 1000);
  }
  function initRefresh() {
    var control = document.getElementById("refresh-control");
    var live = document.getElementById("live");
    if (!control || !live) { return; }
    control.hidden = false;
    var select = document.getElementById("refresh-interval");
    var pause = document.getElementById("refresh-pause");
    var chosen = stored("venturi-refresh") || live.getAttribute("data-interval") || "5";
    if (select.querySelector('option[value="' + chosen + '"]')) { select.value = chosen; }
    function label() {
      pause.textContent = paused() ? "resume" : "pause";
      pause.setAttribute("aria-pressed", paused() ? "true" : "false");
      if (paused()) { showStatus("paused"); }
    }
    select.addEventListener("change", function () {
      store("venturi-refresh", select.value);
      schedule();
    });
    pause.addEventListener("click", function () {
      store("venturi-refresh-paused", paused() ? null : "1");
      label();
      if (!paused()) { showStatus(""); refresh(); }
    });
    label();
    schedule();
  }

  // --- selection: "all" checks every row; the selection's buttons count the rows -------
  function initSelection() {
    var all = document.getElementById("select-all");
    var boxes = Array.prototype.slice.call(document.querySelectorAll("input[name=ids]"));
    var count = document.getElementById("selected-count");
    function update() {
      var n = boxes.filter(function (b) { return b.checked; }).length;
      if (count) { count.textContent = String(n); }
      document.querySelectorAll(".selection button").forEach(function (b) { b.disabled = n === 0; });
      if (all) { all.checked = n > 0 && n === boxes.length; }
    }
    if (all) {
      all.addEventListener("change", function () {
        boxes.forEach(function (b) { b.checked = all.checked; });
        update();
      });
    }
    boxes.forEach(function (b) { b.addEventListener("change", update); });
    update();
  }

  function init() {
    initTheme();
    initRefresh();
    initSelection();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
