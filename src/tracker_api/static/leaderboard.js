// The live leaderboard: numbers, tables, log and charts of one project.
// Updates come from the websocket feed (`tracker live`); while it is down the page polls
// stats.json, so it keeps working without the feed. Nothing is loaded from other hosts.
(function () {
  "use strict";
  const project = document.querySelector('meta[name="tracker-project"]').content;
  const liveSetting = document.querySelector('meta[name="tracker-live-url"]').content;
  const POLL_MS = 5000, RETRY_WS_MS = 10000, LOG_LINES = 200, TOP_SERIES = 10, TOP_POINTS = 720;
  const TABLE_ROWS = 100;
  let showAll = false, polling = null, socket = null;
  const seenLog = new Set();
  // The top downloaders' items: the server's history (stats.charts.top_downloaders, every ten
  // minutes for two days, hourly before) followed by the snapshots received since it was taken.
  let topServer = {t: [], series: {}};
  const topLive = [];   // {t, items: {downloader: items}, top: [names]}, bounded
  const charts = {};

  const $ = (id) => document.getElementById(id);
  const num = (n) => (n === null || n === undefined) ? "–" : Math.round(n).toLocaleString("en-US");
  const pct = (x) => (x === null || x === undefined) ? "–" : (100 * x).toFixed(1) + "%";
  function bytes(n) {
    if (n === null || n === undefined) return "–";
    const units = ["B", "KB", "MB", "GB", "TB", "PB"];
    let i = 0;
    while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
    return (i ? n.toFixed(1) : Math.round(n)) + " " + units[i];
  }
  function duration(s) {
    if (s === null || s === undefined) return "–";
    if (s < 90) return s.toFixed(0) + " s";
    if (s < 5400) return (s / 60).toFixed(0) + " min";
    if (s < 172800) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }
  function cell(row, text, numeric) {
    const td = row.insertCell();
    td.textContent = text;
    if (numeric) td.className = "num";
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
    $("irsr").textContent = pct(s.irsr_recent !== null && s.irsr_recent !== undefined ? s.irsr_recent : s.irsr);
    const rtt = s.rtt || {};
    $("rtt").textContent = duration(rtt.mean_s) + (rtt.p50_s !== null && rtt.p50_s !== undefined ? " (" + duration(rtt.p50_s) + ")" : "");
    $("reclaim").textContent = pct(s.reclaim_rate);
    $("items-per-s").textContent = s.items_per_s === undefined ? "–" : s.items_per_s.toFixed(2);
    $("bytes-per-s").textContent = bytes(s.bytes_per_s);
    $("eta").textContent = s.backlog_growing ? "∞" : duration(s.eta_s);
    $("backlog-warning").hidden = !s.backlog_growing;
    const u = s.uniques || {};
    $("uniques").textContent = num(u.downloaders_day) + " / " + num(u.downloaders_month);
    $("warriors").textContent = num(data.warriors_online !== undefined ? data.warriors_online : data.warriors_active);
    // After "show all" the feed's top rows must not replace the full table fetched by poll().
    const rows = data.leaderboard || [];
    if (!showAll || rows.length >= (data.downloaders_total || 0)) renderDownloaders(rows, data.downloaders_total || 0);
    renderDomains(data.domain_bytes || {});
    if (data.recent_log) addLog(data.recent_log);
    recordTop(data.leaderboard || [], (s.charts || {}).top_downloaders);
    renderCharts(s.charts);
  }

  function renderDownloaders(rows, total) {
    const body = $("downloaders").tBodies[0];
    body.replaceChildren();
    const shown = showAll ? rows : rows.slice(0, TABLE_ROWS);
    shown.forEach((d, i) => {
      const row = body.insertRow();
      cell(row, i + 1, true); cell(row, d.downloader); cell(row, num(d.items), true);
      cell(row, bytes(d.bytes), true); cell(row, d.version || "");
    });
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
      if (v[i] !== null && v[i] !== undefined) latest[n] = v[i];
    }));
    const last = topLive[topLive.length - 1];
    if (last) last.top.forEach((n) => { if (last.items[n] !== undefined) latest[n] = last.items[n]; });
    const names = Object.keys(latest).sort((a, b) => latest[b] - latest[a]).slice(0, TOP_SERIES);
    const t = topServer.t.concat(topLive.map((p) => p.t));
    const columns = names.map((n) => (topServer.series[n] || topServer.t.map(() => null))
      .concat(topLive.map((p) => p.items[n] === undefined ? null : p.items[n])));
    return {names, data: [t].concat(columns)};
  }

  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
  // Counts tick at whole numbers only: 1, 2, 5, 10, 20, 50... (else small ranges repeat labels).
  const COUNT_INCRS = [];
  for (let e = 0; e < 13; e++) for (const m of [1, 2, 5]) COUNT_INCRS.push(m * 10 ** e);
  function chart(id, series, data, format) {
    const el = $(id);
    const width = Math.max(280, el.clientWidth || 500);
    const key = id + ":" + series.map((s) => s.label).join("|");
    if (!charts[id] || charts[id].key !== key) {
      if (charts[id]) charts[id].plot.destroy();
      const show = format || num;
      const opts = {width, height: 180,
        axes: [{}, Object.assign({size: 70, values: (u, ticks) => ticks.map(show)},
                                 format ? {} : {incrs: COUNT_INCRS})],
        series: [{}].concat(series.map((s, i) => ({
          label: s.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
          value: (u, v) => (v === null || v === undefined) ? "–" : show(v)})))};
      charts[id] = {key, plot: new uPlot(opts, data, el)};
    } else {
      charts[id].plot.setData(data);
    }
    el.dataset.points = data[0].length;   // for tests and the curious
    el.dataset.first = data[0].length ? data[0][0] : "";
  }
  function renderCharts(c) {
    if (!c || typeof uPlot === "undefined") return;
    chart("chart-done", [{label: "done"}], [c.hour.t, c.hour.done_total]);
    chart("chart-hourly", [{label: "items/hour"}], [c.hour.t, c.hour.items_done]);
    chart("chart-bytes", [{label: "bytes/s"}], [c.minute.t, c.minute.bytes_done.map((b) => b / 60)], bytes);
    const top = topData();
    if (top.names.length) chart("chart-top", top.names.map((n) => ({label: n})), top.data);
  }

  function setFeed(mode) {
    const feed = $("feed");
    feed.className = "feed " + mode;
    feed.textContent = mode === "live" ? "live" : "polling every " + POLL_MS / 1000 + " s";
    document.body.dataset.feed = mode;
  }

  async function poll() {
    try {
      const top = showAll ? 10000 : TABLE_ROWS;
      const res = await fetch("/" + encodeURIComponent(project) + "/stats.json?top=" + top, {cache: "no-store"});
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
    socket = ws;
    ws.onopen = () => { stopPolling(); setFeed("live"); };
    ws.onmessage = (event) => {
      const msg = JSON.parse(event.data);
      if (msg.type === "log") addLog(msg.lines);
      else if (msg.type === "snapshot") renderSnapshot(msg.data);
    };
    ws.onclose = () => { socket = null; startPolling(); setTimeout(connect, RETRY_WS_MS); };
  }

  $("show-all").addEventListener("click", () => { showAll = true; poll(); setInterval(poll, 6 * POLL_MS); });
  poll();          // numbers at once, whatever the feed does
  connect();
})();
