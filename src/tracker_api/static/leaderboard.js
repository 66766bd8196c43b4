// The live leaderboard: numbers, tables, log and charts of one project.
// Updates come from the websocket feed (`tracker live`); while it is down the page polls
// stats.json, so it keeps working without the feed. Nothing is loaded from other hosts.
// Charts follow the chosen range (hour, day, week, all: stats.json?range=); the feed's
// snapshots carry the default one (week), other ranges are fetched and refreshed here.
(function () {
  "use strict";
  const project = document.querySelector('meta[name="tracker-project"]').content;
  const liveSetting = document.querySelector('meta[name="tracker-live-url"]').content;
  const POLL_MS = 5000, RETRY_WS_MS = 10000, RANGE_REFRESH_MS = 60000, LOG_LINES = 200;
  const TOP_SERIES = 10, TOP_POINTS = 720, TABLE_ROWS = 100, DEFAULT_RANGE = "week";
  const STEP_LABELS = {60: "per minute", 600: "per ten minutes", 3600: "per hour", 86400: "per day"};
  let showAll = false, polling = null;
  let range = DEFAULT_RANGE, rangeTimer = null, rangeCharts = null;
  let picked = null, pickedTimer = null;
  const seenLog = new Set();
  // The top downloaders' items: the server's history for the range (stats.charts.range.top)
  // followed by the snapshots received since it was taken.
  let topServer = {t: [], series: {}};
  const topLive = [];   // {t, items: {downloader: items}, top: [names]}, bounded
  const charts = {};
  let zoomed = false;

  const $ = (id) => document.getElementById(id);
  const given = (x) => x !== null && x !== undefined;
  const num = (n) => given(n) ? Math.round(n).toLocaleString("en-US") : "–";
  const pct = (x) => given(x) ? (100 * x).toFixed(1) + "%" : "–";
  function bytes(n) {
    if (!given(n)) return "–";
    const units = ["B", "KB", "MB", "GB", "TB", "PB"];
    let i = 0;
    while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
    return (i ? n.toFixed(1) : Math.round(n)) + " " + units[i];
  }
  function duration(s) {
    if (!given(s)) return "–";
    if (s < 90) return s.toFixed(0) + " s";
    if (s < 5400) return (s / 60).toFixed(0) + " min";
    if (s < 172800) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }
  function cell(row, text, numeric) {
    const td = row.insertCell();
    td.textContent = text;
    if (numeric) td.className = "num";
    return td;
  }

  // A downloader's colour: a hash of the name into the palette, so it is the same in every
  // chart, in the table and on every visit, whoever else is shown.
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
    "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363"];
  function colorOf(name) {
    let h = 2166136261;   // FNV-1a
    for (let i = 0; i < name.length; i++) { h ^= name.charCodeAt(i); h = Math.imul(h, 16777619); }
    return PALETTE[(h >>> 0) % PALETTE.length];
  }

  function liveUrl() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    if (liveSetting.startsWith(":")) {   // ":PORT": this host, another port
      return scheme + "//" + location.hostname + liveSetting + "/" + encodeURIComponent(project);
    }
    if (liveSetting) {
      const base = liveSetting.startsWith("/") ? scheme + "//" + location.host + liveSetting : liveSetting;
      return base.replace(/\/$/, "") + "/" + encodeURIComponent(project);
    }
    // Default: the feed listens one port above the page's server (`tracker run` does that).
    const port = (parseInt(location.port, 10) || (scheme === "wss:" ? 443 : 80)) + 1;
    return scheme + "//" + location.hostname + ":" + port + "/" + encodeURIComponent(project);
  }

  function renderSnapshot(data) {
    $("title").textContent = data.title;
    $("done").textContent = num(data.done);
    $("out").textContent = num(data.out);
    $("todo").textContent = num(data.todo_total);
    const s = data.stats || {};
    $("irsr").textContent = pct(given(s.irsr_recent) ? s.irsr_recent : s.irsr);
    const rtt = s.rtt || {};
    $("rtt-mean").textContent = duration(rtt.mean_s);
    $("rtt-median").textContent = duration(rtt.p50_s);
    $("reclaim").textContent = pct(s.reclaim_rate);
    $("items-per-s").textContent = given(s.items_per_s) ? s.items_per_s.toFixed(2) : "–";
    $("bytes-per-s").textContent = bytes(s.bytes_per_s);
    $("eta").textContent = s.backlog_growing ? "∞" : duration(s.eta_s);
    $("backlog-warning").hidden = !s.backlog_growing;
    const u = s.uniques || {};
    $("uniques").textContent = num(u.downloaders_day) + " / " + num(u.downloaders_month);
    $("warriors").textContent = num(given(data.warriors_online) ? data.warriors_online : data.warriors_active);
    const rows = data.leaderboard || [];
    $("empty").hidden = (data.done || 0) > 0 || rows.length > 0;
    // After "show all" the feed's top rows must not replace the full table fetched by poll().
    if (!showAll || rows.length >= (data.downloaders_total || 0)) renderDownloaders(rows, data.downloaders_total || 0);
    renderDomains(data.domain_bytes || {});
    if (data.recent_log) addLog(data.recent_log);
    const c = s.charts || {};
    // Range charts come with snapshots of the chosen range only (the feed's are the default's).
    const rangeData = c.range && c.range.range === range ? c.range : null;
    if (rangeData) rangeCharts = rangeData;
    recordTop(rows, rangeData ? rangeData.top : null);
    renderCharts();
  }

  function renderDownloaders(rows, total) {
    const body = $("downloaders").tBodies[0];
    body.replaceChildren();
    const shown = showAll ? rows : rows.slice(0, TABLE_ROWS);
    shown.forEach((d, i) => {
      const row = body.insertRow();
      row.dataset.downloader = d.downloader;
      if (d.downloader === picked) row.className = "selected";
      cell(row, i + 1, true);
      const who = row.insertCell();
      const button = document.createElement("button");
      button.type = "button";
      button.className = "who";
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = colorOf(d.downloader);
      const label = document.createElement("span");
      label.textContent = d.downloader;
      button.append(swatch, label);
      button.title = "Chart of " + d.downloader;
      who.append(button);
      cell(row, num(d.items), true);
      cell(row, bytes(d.bytes), true); cell(row, d.version || "");
    });
    $("downloaders-empty").hidden = shown.length > 0;
    $("downloader-count").textContent = "(" + num(total) + ")";
    $("show-all").hidden = showAll || total <= TABLE_ROWS;
  }

  function renderDomains(domains) {
    const body = $("domains").tBodies[0];
    body.replaceChildren();
    Object.entries(domains).sort((a, b) => b[1] - a[1]).forEach(([domain, n]) => {
      const row = body.insertRow();
      cell(row, domain); cell(row, bytes(n), true);
    });
  }

  // Log lines arrive newest first or oldest first; each is shown once, newest on top.
  function addLog(lines) {
    const log = $("log");
    lines.slice().sort((a, b) => compareIds(a.id, b.id)).forEach((line) => {
      if (seenLog.has(line.id)) return;
      seenLog.add(line.id);
      const li = document.createElement("li");
      const when = new Date(line.at).toISOString().slice(11, 19);
      const items = line.items.length === 1 ? line.items[0] : line.items.length + " items: " + line.items.join(", ");
      li.textContent = when + " " + line.downloader + " " + items + " (" + bytes(line.bytes) + ")";
      li.dataset.id = line.id;
      log.prepend(li);
    });
    while (log.children.length > LOG_LINES) {
      seenLog.delete(log.lastElementChild.dataset.id);
      log.lastElementChild.remove();
    }
    $("log-empty").hidden = log.children.length > 0;
  }
  function compareIds(a, b) {
    const [am, as] = a.split("-").map(Number), [bm, bs] = b.split("-").map(Number);
    return am - bm || as - bs;
  }

  function recordTop(rows, history) {
    if (history && history.t) topServer = history;
    const top = rows.slice(0, TOP_SERIES).map((d) => d.downloader);
    const wanted = new Set(top.concat(Object.keys(topServer.series)));
    const items = {};
    rows.forEach((d) => { if (wanted.has(d.downloader)) items[d.downloader] = d.items; });
    topLive.push({t: Date.now() / 1000, items, top});
    // Live points the server's history now covers are dropped; the rest stay bounded.
    const since = topServer.t.length ? topServer.t[topServer.t.length - 1] : -Infinity;
    while (topLive.length && (topLive[0].t <= since || topLive.length > TOP_POINTS)) topLive.shift();
  }
  function topData() {
    const latest = {};
    topServer.t.forEach((_, i) => Object.entries(topServer.series).forEach(([n, v]) => {
      if (given(v[i])) latest[n] = v[i];
    }));
    const last = topLive[topLive.length - 1];
    if (last) last.top.forEach((n) => { if (last.items[n] !== undefined) latest[n] = last.items[n]; });
    const names = Object.keys(latest).sort((a, b) => latest[b] - latest[a] || (a < b ? -1 : 1)).slice(0, TOP_SERIES);
    const t = topServer.t.concat(topLive.map((p) => p.t));
    const columns = names.map((n) => (topServer.series[n] || topServer.t.map(() => null))
      .concat(topLive.map((p) => p.items[n] === undefined ? null : p.items[n])));
    return {names, data: [t].concat(columns)};
  }

  // Counts tick at whole numbers only: 1, 2, 5, 10, 20, 50... (else small ranges repeat labels).
  const COUNT_INCRS = [];
  for (let e = 0; e < 13; e++) for (const m of [1, 2, 5]) COUNT_INCRS.push(m * 10 ** e);
  const BLUE = "#1f5fa8";

  // Drag-select zooms every time chart to the same span; "reset zoom" shows the whole range
  // again. Only the user's selection moves the scales, so charts never chase one another.
  function zoomTo(u) {
    const sel = u.select;
    if (!sel || sel.width < 2) return;
    const min = u.posToVal(sel.left, "x"), max = u.posToVal(sel.left + sel.width, "x");
    u.setSelect({left: 0, top: 0, width: 0, height: 0}, false);
    zoomed = true;
    $("zoom-reset").disabled = false;
    Object.values(charts).forEach((c) => { if (c.plot.data[0].length) c.plot.setScale("x", {min, max}); });
  }
  function resetZoom() {
    zoomed = false;
    $("zoom-reset").disabled = true;
    Object.values(charts).forEach((c) => {
      const t = c.plot.data[0];
      if (t.length) c.plot.setScale("x", {min: t[0], max: t[t.length - 1]});
    });
  }

  // Away from the cursor the legend reads the newest values, not dashes.
  function showLatest(u) {
    const n = u.data[0].length;
    if (n && u.cursor.idx == null) u.setLegend({idx: n - 1});
  }
  function chartWidth(el) {
    return Math.max(240, Math.floor(el.clientWidth || el.parentElement.clientWidth || 500));
  }
  function chart(id, series, data, format) {
    const el = $(id);
    const key = id + ":" + series.map((s) => s.label).join("|");
    el.querySelectorAll(".empty-row").forEach((p) => p.remove());
    if (!charts[id] || charts[id].key !== key) {
      if (charts[id]) charts[id].plot.destroy();
      const show = format || num;
      const opts = {width: chartWidth(el), height: 200,
        cursor: {drag: {x: true, y: false, setScale: false}},
        hooks: {setSelect: [zoomTo], setScale: [(u, key) => {
          if (key === "x") { el.dataset.xmin = u.scales.x.min; el.dataset.xmax = u.scales.x.max; }
        }], ready: [showLatest], setData: [showLatest], setCursor: [(u) => { if (u.cursor.idx == null) showLatest(u); }]},
        axes: [{}, Object.assign({size: 64, values: (u, ticks) => ticks.map(show)},
                                 format ? {} : {incrs: COUNT_INCRS})],
        series: [{}].concat(series.map((s) => ({
          label: s.label, stroke: s.color || BLUE, width: 2, spanGaps: true,
          points: {show: data[0].length < 3},
          fill: s.fill, value: (u, v) => given(v) ? show(v) : "–"})))};
      charts[id] = {key, plot: new uPlot(opts, data, el)};
      if (zoomed) resetZoom();
    } else {
      charts[id].plot.setData(data, !zoomed);
    }
    el.dataset.points = data[0].length;   // for tests and the curious
    el.dataset.first = data[0].length ? data[0][0] : "";
  }
  function emptyChart(id, text) {
    const el = $(id);
    if (charts[id]) { charts[id].plot.destroy(); delete charts[id]; }
    if (!el.querySelector(".empty-row")) {
      const p = document.createElement("p");
      p.className = "empty-row";
      p.textContent = text;
      el.append(p);
    }
    el.dataset.points = 0;
  }
  function renderCharts() {
    if (typeof uPlot === "undefined") return;
    const c = rangeCharts;
    if (c && c.t.length) {
      $("step-label").textContent = STEP_LABELS[c.step_s] || "per " + duration(c.step_s);
      chart("chart-done", [{label: "items done (total)", fill: "rgba(31,95,168,0.08)"}], [c.t, c.done_total]);
      chart("chart-hourly", [{label: "items " + (STEP_LABELS[c.step_s] || "")}], [c.t, c.items_done]);
      chart("chart-bytes", [{label: "bytes/s"}], [c.t, c.bytes_per_s], bytes);
    }
    const top = topData();
    if (top.names.length) chart("chart-top", top.names.map((n) => ({label: n, color: colorOf(n)})), top.data);
    else emptyChart("chart-top", "Waiting for warriors: no downloader has done anything yet.");
  }

  // -- ranges -----------------------------------------------------------------------------------
  function statsUrl(params) {
    const query = new URLSearchParams(Object.assign({top: showAll ? 10000 : TABLE_ROWS, range}, params));
    return "/" + encodeURIComponent(project) + "/stats.json?" + query;
  }
  // stats.json answers 503 (being prepared) or 429 (too many asks) with Retry-After: wait, try again.
  async function fetchStats(url) {
    for (let tries = 0; ; tries++) {
      const res = await fetch(url, {cache: "no-store"});
      if ((res.status !== 503 && res.status !== 429) || tries >= 3) return res;
      const wait = Number(res.headers.get("Retry-After")) || 1;
      await new Promise((done) => setTimeout(done, wait * 1000));
    }
  }
  async function fetchRange() {
    try {
      const res = await fetchStats(statsUrl({}));
      if (res.ok) renderSnapshot(await res.json());
    } catch (e) { /* the next refresh tries again */ }
  }
  function pickRange(name) {
    if (name === range) return;
    range = name;
    document.querySelectorAll(".range button").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.range === name)));
    document.body.dataset.range = name;
    rangeCharts = null;
    topServer = {t: [], series: {}};
    topLive.length = 0;
    zoomed = false;
    $("zoom-reset").disabled = true;
    if (rangeTimer !== null) { clearInterval(rangeTimer); rangeTimer = null; }
    // The feed carries the default range; others are refreshed here, less often.
    if (name !== DEFAULT_RANGE) rangeTimer = setInterval(fetchRange, RANGE_REFRESH_MS);
    fetchRange();
    if (picked) fetchDownloader();
  }

  // -- one downloader's chart -------------------------------------------------------------------
  async function fetchDownloader() {
    const name = picked;
    try {
      const res = await fetchStats(statsUrl({top: 1, downloader: name}));
      if (!res.ok || name !== picked) return;
      const h = (await res.json()).downloader_chart;
      $("downloader-figure").hidden = false;
      $("downloader-name").textContent = name + " (" + num(h.items) + " items, " + bytes(h.bytes) + ")";
      const [t, n] = withinRange(h.t, h.items_total);
      if (t.length > 1) chart("chart-downloader", [{label: name, color: colorOf(name)}], [t, n]);
      else emptyChart("chart-downloader", name + " has not completed an item yet.");
    } catch (e) { /* kept as it was */ }
  }
  // A downloader's points within the chosen range, starting with their count at its start.
  const RANGE_S = {hour: 3600, day: 86400, week: 604800};
  function withinRange(t, n) {
    if (!RANGE_S[range]) return [t, n];
    const now = Date.now() / 1000, start = now - RANGE_S[range];
    const i = t.findIndex((x) => x >= start);
    if (i < 0) return t.length ? [[start, now], [n[n.length - 1], n[n.length - 1]]] : [t, n];
    if (i === 0) return [t, n];
    return [[start].concat(t.slice(i)), [n[i - 1]].concat(n.slice(i))];
  }
  function pickDownloader(name) {
    picked = name;
    document.querySelectorAll("#downloaders tbody tr").forEach((r) => r.classList.toggle("selected", r.dataset.downloader === name));
    if (pickedTimer !== null) clearInterval(pickedTimer);
    pickedTimer = setInterval(fetchDownloader, RANGE_REFRESH_MS);
    fetchDownloader();
  }
  function closeDownloader() {
    picked = null;
    if (pickedTimer !== null) { clearInterval(pickedTimer); pickedTimer = null; }
    $("downloader-figure").hidden = true;
    if (charts["chart-downloader"]) { charts["chart-downloader"].plot.destroy(); delete charts["chart-downloader"]; }
    document.querySelectorAll("#downloaders tr.selected").forEach((r) => r.classList.remove("selected"));
  }

  // -- feed and polling -------------------------------------------------------------------------
  function setFeed(mode) {
    const feed = $("feed");
    feed.className = "feed " + mode;
    feed.textContent = mode === "live" ? "live" : "polling every " + POLL_MS / 1000 + " s";
    document.body.dataset.feed = mode;
  }

  async function poll() {
    try {
      const res = await fetchStats(statsUrl({}));
      if (res.ok) renderSnapshot(await res.json());
    } catch (e) { /* the next poll tries again */ }
  }
  function startPolling() {
    setFeed("polling");
    if (polling === null) { poll(); polling = setInterval(poll, POLL_MS); }
  }
  function stopPolling() {
    if (polling !== null) { clearInterval(polling); polling = null; }
  }

  function connect() {
    let ws;
    try { ws = new WebSocket(liveUrl()); } catch (e) { startPolling(); setTimeout(connect, RETRY_WS_MS); return; }
    ws.onopen = () => { stopPolling(); setFeed("live"); };
    ws.onmessage = (event) => {
      const msg = JSON.parse(event.data);
      if (msg.type === "log") addLog(msg.lines);
      else if (msg.type === "snapshot") renderSnapshot(msg.data);
    };
    ws.onclose = () => { startPolling(); setTimeout(connect, RETRY_WS_MS); };
  }

  // Charts follow the page's width (a phone turned sideways, a resized window).
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => Object.entries(charts).forEach(([id, c]) => {
      c.plot.setSize({width: chartWidth($(id)), height: 200});
    }), 150);
  });

  document.querySelectorAll(".range button").forEach((b) => b.addEventListener("click", () => pickRange(b.dataset.range)));
  $("zoom-reset").addEventListener("click", resetZoom);
  $("downloaders").tBodies[0].addEventListener("click", (event) => {
    const row = event.target.closest("tr");
    if (row && row.dataset.downloader) pickDownloader(row.dataset.downloader);
  });
  $("downloader-close").addEventListener("click", closeDownloader);
  $("show-all").addEventListener("click", () => { showAll = true; poll(); setInterval(poll, 6 * POLL_MS); });
  document.body.dataset.range = range;
  poll();          // numbers at once, whatever the feed does
  connect();
})();
