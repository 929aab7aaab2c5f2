// xs web: the page.  No library, no build step: plain DOM, inline SVG
// charts, and the server's events (EventSource).  Every number comes
// from the server (the store's one overview, as xs top shows it).
"use strict";

(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const PENDING_PAGE = 10;
  const DEAD_PAGE = 50;
  const csrf = $('meta[name="xs-csrf"]').getAttribute("content");
  const state = {
    overview: null,
    history: {},          // "streamkey/groupkey" -> [[t, lag, in, delivered, acked], ...]
    windowMs: 600000,
    selected: null,       // key of the stream shown in detail
    page: { mode: "latest", first: null, last: null, hit: null },
    detailSig: null,
    detailBusy: false,
    detailAgain: false,
    deadShown: 0,         // dead letters the selected stream's list shows ("More" loaded more)
    source: null,
    entriesSeq: 0,
    sourceKey: undefined,
    pendingShown: {},     // group key -> pending rows its card shows (the selected stream's)
  };

  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "text") e.textContent = v;
      else if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children || []) e.append(c);
    return e;
  }
  // first paint, for benchmarks/bench_web.py: ms from the navigation (once each)
  const mark = (name) => { if (!performance.getEntriesByName(name).length) performance.mark(name); };
  const num = (v) => (v === null || v === undefined ? "-" : String(v));

  async function api(path, opts) {
    const r = await fetch(path, Object.assign({ credentials: "same-origin" }, opts || {}));
    let body = null;
    try { body = await r.json(); } catch (e) { body = { error: r.status + " " + r.statusText }; }
    if (!r.ok) throw new Error((body && body.error) || r.statusText);
    return body;
  }

  function showError(text) {
    const p = $("#error");
    p.hidden = !text;
    p.textContent = text || "";
  }

  // ------------------------------------------------------------ the overview

  // The live parts of the page (the overview's tables, the selected
  // stream's group cards and dead letters) are drawn anew at each refresh and merged into
  // what is shown: an element that matches stays the same element, only
  // its changed attributes and text are written.  Drawn anew under the
  // pointer, a button would take a person's click (press on one button,
  // release on its replacement: no click), their hover, their text
  // selection and the rows they loaded with "More".  Children match by key
  // (data-key, data-id, data-group, data-consumer), the others by
  // position and tag; a kept button keeps its handler, which acts on
  // the same key.
  const KEYS = ["data-key", "data-id", "data-group", "data-consumer"];
  function keyOf(n) {
    if (n.nodeType !== 1) return null;
    for (const a of KEYS) { const v = n.getAttribute(a); if (v !== null) return a + "=" + v; }
    return null;
  }

  function morph(old, fresh) {
    if (old.nodeType !== 1) {
      if (old.nodeValue !== fresh.nodeValue) old.nodeValue = fresh.nodeValue;
      return;
    }
    for (const a of old.getAttributeNames()) if (!fresh.hasAttribute(a)) old.removeAttribute(a);
    for (const a of fresh.getAttributeNames()) {
      const v = fresh.getAttribute(a);
      if (old.getAttribute(a) !== v) old.setAttribute(a, v);
    }
    morphChildren(old, Array.from(fresh.childNodes));
  }

  function morphChildren(parent, fresh) {
    const keyed = new Map(), plain = [];
    for (const n of parent.childNodes) {
      const k = keyOf(n);
      if (k === null) plain.push(n); else keyed.set(k, n);
    }
    let at = parent.firstChild, p = 0;
    for (const f of fresh) {
      const k = keyOf(f);
      let o = null;
      if (k !== null) {
        o = keyed.get(k) || null;
        keyed.delete(k);
      } else if (p < plain.length) {
        o = plain[p++];
      }
      if (o && (o.nodeName !== f.nodeName || o.nodeType !== f.nodeType)) o = null;
      const n = o || f;
      if (o) morph(o, f);
      if (n === at) at = at.nextSibling;
      else parent.insertBefore(n, at);
    }
    while (at) {             // what is left after the placed ones matched nothing new
      const next = at.nextSibling;
      at.remove();
      at = next;
    }
  }

  function renderOverview(doc) {
    if (doc.error) { showError(doc.error); return; }
    showError("");
    state.overview = doc;
    $("#updated").textContent = "updated " + new Date(doc.now).toLocaleTimeString();
    morphChildren($("#streams tbody"), doc.streams.map((s) => el("tr", {
      "data-stream": s.name, "data-key": s.key, class: s.key === state.selected ? "selected" : null,
    }, [
      el("td", {}, [el("button", { type: "button", class: "link stream-link", text: s.name,
        onclick: () => select(s.key) })]),
      el("td", { class: "num length", text: num(s.length) }),
      el("td", { class: "num in", text: s.text.in }),
      el("td", { class: "age", text: s.text.last_entry_age }),
      el("td", { class: "num groups", text: num(s.groups) }),
      el("td", { class: "num pending", text: num(s.pending) }),
      el("td", { class: "num lag", text: s.text.max_lag }),
      el("td", { class: "num dead", text: num(s.dead) }),
    ])));
    $("#streams .empty").hidden = doc.streams.length > 0;
    mark("xs:streams");
    morphChildren($("#groups tbody"), doc.groups.map((g) => el("tr", {
      "data-stream": g.stream, "data-group": g.group, "data-key": g.key, class: g.stream_key === state.selected ? "selected" : null,
    }, [
      el("td", {}, [el("button", { type: "button", class: "link", text: g.stream, onclick: () => select(g.stream_key) })]),
      el("td", { class: "group", text: g.group }),
      el("td", { class: "num lag", text: g.text.lag }),
      el("td", { class: "num lag-age", text: g.text.lag_age }),
      el("td", { class: "num pending", text: g.text.pending }),
      el("td", { class: "num oldest", text: g.text.oldest }),
      el("td", { class: "num consumers", text: g.text.consumers }),
      el("td", { class: "num delivered", text: g.text.delivered }),
      el("td", { class: "num acked", text: g.text.acked }),
      el("td", { class: "num dead", text: g.text.dead }),
      el("td", { class: "chart" }, [chart(g.key)]),
    ])));
    $("#groups .empty").hidden = doc.groups.length > 0;
    if (state.selected) {
      const s = doc.streams.find((x) => x.key === state.selected);
      if (!s) { $("#detail-name").textContent = "(gone)"; return; }
      const sig = JSON.stringify([s.length, s.last_id, s.pending, s.dead, s.groups,
        doc.groups.filter((g) => g.stream_key === s.key).map((g) => [g.lag, g.pending, g.consumers])]);
      if (sig !== state.detailSig) {
        state.detailSig = sig;
        if (state.page.mode === "latest") loadEntries({}, "latest");     // first: the page a person reads
        refreshDetail();
      }
    }
  }

  function addSamples(doc) {
    if (!doc.tick || doc.error) return;
    const keep = doc.now - state.windowMs;
    for (const g of doc.groups) {
      const h = state.history[g.key] || (state.history[g.key] = []);
      if (!h.length || h[h.length - 1][0] < doc.now) h.push([doc.now, g.lag, g.in, g.delivered, g.acked]);
      while (h.length && h[0][0] < keep) h.shift();
    }
  }

  // A small chart: lag (entries) and the rates in/s and delivered/s over
  // the kept window, each scaled to its own largest value.
  const SVG = "http://www.w3.org/2000/svg";
  function chart(key) {
    const W = 160, H = 32, P = 2;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "chart");
    svg.setAttribute("width", W);
    svg.setAttribute("height", H);
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    const h = state.history[key] || [];
    const now = state.overview ? state.overview.now : Date.now();
    // the window fills from the left as samples come in (at most the kept minutes)
    const t0 = h.length ? Math.max(now - state.windowMs, Math.min(h[0][0], now - 60000)) : now - state.windowMs;
    const span = Math.max(1, now - t0);
    function line(idx, cls) {
      const pts = h.filter((s) => s[idx] !== null && s[idx] !== undefined);
      if (!pts.length) return 0;
      const max = Math.max(...pts.map((s) => s[idx]), 1e-9);
      const p = document.createElementNS(SVG, "polyline");
      p.setAttribute("class", cls);
      p.setAttribute("points", pts.map((s) => {
        const x = P + (W - 2 * P) * Math.max(0, s[0] - t0) / span;
        const y = H - P - (H - 2 * P) * (s[idx] / max);
        return x.toFixed(1) + "," + y.toFixed(1);
      }).join(" "));
      svg.append(p);
      return max;
    }
    const lagMax = line(1, "lag");
    const inMax = line(2, "rate");
    const delMax = line(3, "deliv");
    const title = document.createElementNS(SVG, "title");
    const last = h.length ? h[h.length - 1] : null;
    title.textContent = "last " + Math.max(1, Math.round(span / 60000)) + " min: lag max " + num(lagMax) +
      ", in/s max " + (inMax ? inMax.toFixed(1) : "-") + ", delivered/s max " + (delMax ? delMax.toFixed(1) : "-") +
      (last ? "; now lag " + num(last[1]) : "");
    svg.append(title);
    return svg;
  }

  // ------------------------------------------------------------ one stream

  function select(key) {
    if (state.selected === key) return;
    state.selected = key;
    state.detailSig = null;
    state.deadShown = 0;
    $("#dead tbody").replaceChildren();         // another stream's letters: nothing of them is kept
    $("#dead-origins").replaceChildren();
    history.replaceState(null, "", "#s=" + key);
    const s = state.overview && state.overview.streams.find((x) => x.key === key);
    $("#detail").hidden = !key;
    $("#detail-name").textContent = s ? s.name : "";
    $("#tail-lines").replaceChildren();
    $("#group-details").replaceChildren();      // another stream's cards: nothing of them is kept
    state.pendingShown = {};
    $("#dead-result").hidden = true;
    state.page = { mode: "latest", first: null, last: null, hit: null };
    connect();
    // the overview shows the detail: its entries and groups are read when
    // it sees a stream whose numbers it has not shown yet (detailSig)
    if (key && state.overview) renderOverview(state.overview);
  }

  function fieldCells(fields) {
    if (fields === null) return [el("span", { class: "deleted", text: "(deleted)" })];
    const out = [];
    fields.forEach(([k, v], n) => {
      if (n) out.push(" ");
      out.push(el("span", { class: "field-name", text: k }), "=", el("span", { class: "field-value", text: v }));
    });
    return out;
  }

  async function loadEntries(params, mode) {
    const key = state.selected;
    if (!key) return;
    const q = new URLSearchParams(Object.assign({ key: key, count: "50" }, params));
    const mine = ++state.entriesSeq;       // a later request (a click, a refresh) wins
    state.page.mode = mode;
    let page;
    try {
      page = await api("/api/entries?" + q.toString());
    } catch (e) {
      $("#page-info").textContent = e.message;
      return;
    }
    if (key !== state.selected || mine !== state.entriesSeq) return;
    const ents = page.entries;
    state.page = {
      mode: mode, hit: params.at || null, earlier: page.earlier, later: page.later,
      first: ents.length ? ents[0].id : null, last: ents.length ? ents[ents.length - 1].id : null,
    };
    $("#entries tbody").replaceChildren(...ents.map((e, n) => el("tr", {
      "data-id": e.id, class: (state.page.hit && n === 0) ? "hit" : null,
    }, [el("td", { class: "id", text: e.id }), el("td", { class: "time", text: e.time }),
        el("td", { class: "fields" }, fieldCells(e.fields))])));
    mark("xs:entries");
    $("#page-first").disabled = !page.earlier;
    $("#page-earlier").disabled = !page.earlier;
    $("#page-later").disabled = !page.later;
    $("#page-info").textContent = ents.length
      ? ents.length + " of " + page.length + " entries: " + state.page.first + " .. " + state.page.last
      : (page.length ? "no entries here (" + page.length + " in the stream)" : "the stream is empty");
  }

  async function refreshDetail() {
    if (state.detailBusy) { state.detailAgain = true; return; }
    state.detailBusy = true;
    try {
      do {
        state.detailAgain = false;
        const key = state.selected;
        if (!key) return;
        let d;
        try { d = await api("/api/stream?key=" + key); } catch (e) { showError(e.message); return; }
        if (key !== state.selected) continue;
        $("#detail-name").textContent = d.name;
        const cards = [];
        for (const g of d.groups) {
          let pend = { pending: [], more: false };
          try {
            // as many as the card shows ("More pending" loaded more): a refresh keeps them
            const shown = Math.max(PENDING_PAGE, state.pendingShown[g.group_key] || 0);
            pend = await api("/api/pending?key=" + key + "&group=" + g.group_key + "&count=" + shown);
          } catch (e) { /* the group went away meanwhile */ }
          cards.push(groupCard(key, g, pend));
        }
        morphChildren($("#group-details"), cards.length ? cards : [el("p", { text: "No consumer groups." })]);
        await renderDead(key, d);
      } while (state.detailAgain);
    } finally {
      state.detailBusy = false;
    }
  }

  function groupCard(key, g, pend) {
    const pendBody = el("tbody", {}, pend.pending.map(pendingRow));
    const more = el("button", { type: "button", text: "More pending", hidden: pend.more ? null : "" });
    more.addEventListener("click", async () => {
      const n = await loadMore(key, pendBody, more,
        "/api/pending?key=" + key + "&group=" + g.group_key + "&count=" + PENDING_PAGE, "pending", pendingRow);
      if (n !== null) state.pendingShown[g.group_key] = n;
    });
    return el("div", { class: "group-card", "data-group": g.group }, [
      el("h4", { text: "Group " + g.group + ": lag " + (g.lag === null ? "?" : g.lag) + ", pending " + g.pending +
        (g.nacked ? " (" + g.nacked + " NACKed)" : "") + ", last delivered " + num(g.last_delivered_id) }),
      el("table", { class: "consumers" }, [
        el("thead", {}, [el("tr", {}, [el("th", { text: "Consumer" }), el("th", { class: "num", text: "Pending" }),
          el("th", { class: "num", text: "Idle" }), el("th", { class: "num", text: "Inactive" })])]),
        el("tbody", {}, g.consumers.map((c) => el("tr", { "data-consumer": c.name }, [
          el("td", { text: c.name }), el("td", { class: "num pending", text: num(c.pending) }),
          el("td", { class: "num idle", text: c.idle }), el("td", { class: "num", text: c.inactive })]))),
      ]),
      el("table", { class: "pending" }, [
        el("thead", {}, [el("tr", {}, [el("th", { text: "Pending ID" }), el("th", { text: "Consumer" }),
          el("th", { class: "num", text: "Idle" }), el("th", { class: "num", text: "Deliveries" })])]),
        pendBody]),
      more,
    ]);
  }

  function pendingRow(p) {
    return el("tr", { "data-id": p.id }, [el("td", { class: "mono", text: p.id }),
      el("td", { text: p.consumer === null ? "(NACKed)" : p.consumer }),
      el("td", { class: "num idle", text: p.idle }), el("td", { class: "num deliveries", text: num(p.deliveries) })]);
  }

  // ------------------------------------------------------------ dead letters

  async function renderDead(key, d) {
    const section = $("#dead");
    const total = d.dead_letters.reduce((n, x) => n + x.count, 0);
    section.hidden = total === 0 && !$("#dead-result").textContent;
    const origins = [];
    if (total) {
      // the buttons say what they do in their attributes, read at the click
      // (one listener, init): a refresh updates a kept button's numbers
      origins.push(el("button", { type: "button", id: "redrive-all", "data-key": "all", "data-count": total,
        "data-name": d.name, text: "Re-drive all " + total + " dead letter" + (total === 1 ? "" : "s") }));
      const byStream = {};
      for (const x of d.dead_letters) {
        const o = byStream[x.origin_key] || (byStream[x.origin_key] = { name: x.origin_stream, count: 0 });
        o.count += x.count;
      }
      const keys = Object.keys(byStream);
      if (keys.length > 1) {
        for (const k of keys) {
          origins.push(el("button", { type: "button", class: "redrive-origin", "data-key": "origin:" + k,
            "data-origin": k, "data-origin-name": byStream[k].name, "data-count": byStream[k].count,
            "data-name": d.name, text: "Re-drive the " + byStream[k].count + " from " + byStream[k].name }));
        }
      }
      origins.push(el("p", {}, [d.dead_letters.map((x) => x.count + " from " + x.origin_stream + " (group " +
        x.origin_group + ")").join("; ")]));
    }
    morphChildren($("#dead-origins"), origins);
    if (!total) { $("#dead tbody").replaceChildren(); $("#dead-more").hidden = true; return; }
    let page;
    const shown = Math.max(DEAD_PAGE, state.deadShown);      // as many as "More" loaded: kept
    try { page = await api("/api/dead?key=" + key + "&count=" + shown); } catch (e) { return; }
    if (key !== state.selected) return;
    morphChildren($("#dead tbody"), page.dead_letters.map(deadRow));
    $("#dead-more").hidden = !page.more;
  }

  // A "More" button's click: the page after the last row of ``body`` (rows
  // carry their ID in data-id) from ``url``, its ``field`` drawn with
  // ``row`` and appended, the button hidden when nothing is left.  How
  // many rows ``body`` shows now (a refresh asks for as many), or null if
  // another stream was opened meanwhile.
  async function loadMore(key, body, button, url, field, row) {
    const rows = body.querySelectorAll("tr");
    const after = rows.length ? rows[rows.length - 1].getAttribute("data-id") : "";
    const page = await api(url + "&after=" + after);
    if (key !== state.selected) return null;
    body.append(...page[field].map(row));
    button.hidden = !page.more;
    return body.children.length;
  }

  function deadRow(x) {
    const o = x.origin;
    return el("tr", { "data-id": x.id }, [
      el("td", { text: x.id }),
      el("td", { text: o ? o.stream : "(not a dead letter)" }),
      el("td", { text: o ? o.id : "" }),
      el("td", { text: o ? o.group + " / " + o.consumer : "" }),
      el("td", { class: "num", text: o ? o.deliveries : "" }),
      el("td", { text: o ? o.exit : "", title: o && o.stderr ? o.stderr : null }),
      el("td", { class: "fields" }, fieldCells(x.fields)),
    ]);
  }

  async function redrive(key, name, origins, count, originName) {
    const what = count + " dead letter" + (count === 1 ? "" : "s") + " of " + name +
      (originName ? " from " + originName : "");
    if (!window.confirm("Re-drive " + what + " back to the streams they came from?\n" +
        "Each is added to its origin stream again (a new ID) and deleted from " + name + ", as xs redrive does.")) {
      return;
    }
    const out = $("#dead-result");
    out.hidden = false;
    out.className = "result";
    try {
      const r = await api("/api/redrive", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-XS-CSRF": csrf },
        body: JSON.stringify({ stream: key, origins: origins }),
      });
      let text = "redrove " + r.redriven + " dead letter" + (r.redriven === 1 ? "" : "s") + " from " +
        r.dead_letter_stream;
      if (r.stuck.length) {
        text += "; " + r.stuck.length + " could not go back: " + r.stuck.map((s) => s.dead + " (" + s.error + ")").join(", ");
        out.className = "result bad";
      }
      out.textContent = text;
    } catch (e) {
      out.className = "result bad";
      out.textContent = "re-drive failed: " + e.message;
    }
    refreshDetail();
  }

  // ------------------------------------------------------------ live: server-sent events

  function connect() {
    const key = state.selected || null;
    if (state.source && state.sourceKey === key) return;
    if (state.source) state.source.close();
    state.sourceKey = key;
    const es = new EventSource("/api/events" + (key ? "?tail=" + key : ""));
    state.source = es;
    const status = $("#status");
    es.onopen = () => { status.textContent = "live"; status.className = "status live"; };
    es.onerror = () => { status.textContent = "reconnecting"; status.className = "status down"; };
    es.addEventListener("history", (ev) => {
      const h = JSON.parse(ev.data);
      state.windowMs = h.window_ms;
      state.history = h.groups;
    });
    es.addEventListener("overview", (ev) => {
      const doc = JSON.parse(ev.data);
      addSamples(doc);
      renderOverview(doc);
    });
    es.addEventListener("tail", (ev) => {
      const t = JSON.parse(ev.data);
      if ($("#tail-pause").checked && !t.reset) return;
      const ol = $("#tail-lines");
      if (t.reset) ol.replaceChildren();
      if (t.skipped) ol.append(el("li", { class: "deleted", text: "(skipped ahead: too many entries at once)" }));
      for (const e of t.entries) {
        const li = el("li", { "data-id": e.id, class: t.reset ? null : "new" },
          [e.id + "  " + (e.time ? e.time + "  " : "")].concat(fieldCells(e.fields)));
        ol.append(li);
      }
      while (ol.children.length > 500) ol.firstElementChild.remove();
      ol.scrollTop = ol.scrollHeight;
    });
  }

  // ------------------------------------------------------------ controls

  function parseTime(text) {
    const t = text.trim();
    if (/^\d+$/.test(t)) return Number(t);
    // a date alone is its local midnight, as xs tail --since reads it (JS would take UTC)
    const ms = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(t) ? t + "T00:00" : t.replace(" ", "T"));
    return Number.isNaN(ms) ? null : ms;
  }

  function init() {
    $("#page-first").addEventListener("click", () => loadEntries({ first: "1" }, "page"));
    $("#page-latest").addEventListener("click", () => loadEntries({}, "latest"));
    $("#page-earlier").addEventListener("click", () => {
      if (state.page.first) loadEntries({ before: state.page.first }, "page");
    });
    $("#page-later").addEventListener("click", () => {
      if (state.page.last) loadEntries({ after: state.page.last }, "page");
    });
    $("#jump-id").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const id = ev.target.elements.id.value.trim();
      if (id) loadEntries({ at: id }, "page");
    });
    $("#jump-time").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const ms = parseTime(ev.target.elements.time.value);
      if (ms === null) { $("#page-info").textContent = "not a time: give 2026-11-27T10:00:00Z, a local time or ms"; return; }
      loadEntries({ time: String(ms) }, "page");
    });
    $("#close-detail").addEventListener("click", () => { select(null); history.replaceState(null, "", "#"); });
    $("#dead-more").addEventListener("click", async () => {
      const key = state.selected;
      const n = await loadMore(key, $("#dead tbody"), $("#dead-more"), "/api/dead?key=" + key + "&count=" + DEAD_PAGE,
        "dead_letters", deadRow);
      if (n !== null) state.deadShown = n;
    });
    $("#dead-origins").addEventListener("click", (ev) => {
      const b = ev.target.closest("button[data-count]");
      if (!b || !state.selected) return;
      const origin = b.getAttribute("data-origin");
      redrive(state.selected, b.getAttribute("data-name"), origin ? [origin] : null, Number(b.getAttribute("data-count")),
        b.getAttribute("data-origin-name"));
    });
    const m = /^#s=([0-9a-f]*)$/.exec(location.hash);
    api("/api/overview").then((doc) => {
      renderOverview(doc);
      if (m) select(m[1]); else connect();
    }).catch((e) => { showError(e.message); connect(); });
  }

  init();
})();
