// cxreval review page: keyboard-first checking of the engine's judgements.
// Served by `cxreval review serve`; talks only to the server that served it. Every change (an
// answer, a removal, a note, a pair checked) is kept in this browser (IndexedDB, per server
// address, reviewer and sample) the moment it is given, and POSTed in order with an id of its own
// (the server applies an id once). It leaves the browser only when the server has committed it:
// a server out of reach or unable to write (5xx) is retried with backoff, a refusal (4xx) is shown.
"use strict";

(() => {
  const VALUES = {
    presence: ["TP", "FP", "FN", "TN"],
    location: ["aligned", "not-aligned", "not-available"],
    severity: ["aligned", "not-aligned", "not-available"],
    comparison: ["other", "adding-unmentioned-comparison", "missing-mentioned-comparison", "conflicting-comparison"],
  };
  const FIELDS = ["presence", "location", "severity", "comparison"];
  const KEY_FIELD = { p: "presence", l: "location", s: "severity", c: "comparison" };
  const SHORT = { "adding-unmentioned-comparison": "adding", "missing-mentioned-comparison": "missing",
                  "conflicting-comparison": "conflicting", "not-available": "n/a" };

  const params = new URLSearchParams(location.search);
  const reviewer = params.get("reviewer") || "";
  const token = params.get("token") || "";
  const $ = (id) => document.getElementById(id);

  const STORE = "outbox";
  // a status worth retrying: the server (or a proxy) cannot take it now, or the address/token
  // changed (the changes stay kept until the page is opened at the URL the server printed)
  const RETRY = (status) => status >= 500 || [403, 408, 421, 429].includes(status);

  const app = {
    entities: {}, implicit: null, pairs: [], position: 0, pair: null, rows: [], sel: 0, sample: "",
    outbox: [], counter: 0, store: null, kept: false, trouble: null, failures: 0, flushing: false,
    drains: [], waiters: new Map(), wake: null,
  };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }

  function message(text, error) {
    const m = $("message");
    m.textContent = text || "";
    m.classList.toggle("error", !!error);
  }

  // a request that gives up after 90 s (a proxy that never answers must not stall the outbox;
  // the server's own lock wait is shorter, and a write sent again is applied once)
  async function request(path, body) {
    const headers = { "X-Review-Token": token };
    const abort = new AbortController();
    const init = { headers, cache: "no-store", signal: abort.signal };
    if (body !== undefined) {
      init.method = "POST";
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const sep = path.includes("?") ? "&" : "?";
    const timer = setTimeout(() => abort.abort(), 90000);
    try {
      const resp = await fetch(`${path}${sep}reviewer=${encodeURIComponent(reviewer)}`, init);
      const data = await resp.json().catch(() => ({}));
      if (!resp.ok) {
        const err = new Error(data.error || `HTTP ${resp.status}`);
        err.status = resp.status;
        throw err;
      }
      return data;
    } finally {
      clearTimeout(timer);
    }
  }

  // -- the outbox: every change, kept in this browser until the server has committed it --------

  function settle(req) {
    return new Promise((resolve, reject) => {
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }

  async function openStore() {
    try {
      const req = indexedDB.open("cxreval-review", 1);
      req.onupgradeneeded = () => req.result.createObjectStore(STORE, { keyPath: "op_id" });
      app.store = await settle(req);
      app.kept = true;
    } catch (err) {
      app.store = null;  // a browser that keeps no IndexedDB here: changes live in this tab only, and the page says so
      app.kept = false;
    }
  }

  // one transaction on the outbox; resolves with the request's result once committed, undefined on failure
  function stored(mode, fn) {
    if (!app.store) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const failed = () => { app.kept = false; showSaveState(); resolve(undefined); };
      try {
        const tx = app.store.transaction(STORE, mode);
        const req = fn(tx.objectStore(STORE));
        tx.oncomplete = () => resolve(req.result);
        tx.onerror = failed;
        tx.onabort = failed;
      } catch (err) { failed(); }
    });
  }

  async function loadOutbox() {
    const all = (await stored("readonly", (s) => s.getAll())) || [];
    return all.filter((op) => op.reviewer === reviewer && op.sample === app.sample)
      .sort((a, b) => a.at - b.at || a.n - b.n);
  }

  function newId() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function showSaveState() {
    const s = $("save-state");
    const n = app.outbox.length;
    let text = "all answers saved";
    if (n && app.trouble) text = `${app.trouble.summary}: ${n} answers kept in this browser, not saved yet; retrying`;
    else if (n) text = `saving… (${n} waiting)`;
    if (n && !app.kept) text += " (this browser cannot keep them if the tab closes)";
    s.textContent = text;
    s.title = n && app.trouble ? app.trouble.detail : "";
    s.classList.toggle("unsaved", n > 0 && (!!app.trouble || !app.kept));
  }

  // Keep a change and send it after those before it. Resolves with the server's reply once the
  // server has committed it, or null if the server refused it (shown; the pair is reloaded).
  function post(path, body) {
    const op = { op_id: newId(), sample: app.sample, reviewer, path, at: Date.now(), n: app.counter++ };
    op.body = { ...body, op_id: op.op_id };
    app.outbox.push(op);
    stored("readwrite", (s) => s.put(op));
    const reply = new Promise((resolve) => app.waiters.set(op.op_id, resolve));
    showSaveState();
    flush();
    return reply;
  }

  async function send(op) {
    try {
      return { data: await request(op.path, op.body) };
    } catch (err) {
      if (!err.status) return { retry: true, summary: "server unreachable", detail: err.message };
      if (RETRY(err.status)) return { retry: true, summary: `server cannot save (HTTP ${err.status})`, detail: err.message };
      return { refused: err.message };
    }
  }

  function pause(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      app.wake = () => { clearTimeout(timer); resolve(); };
    });
  }

  // send the outbox, oldest first; on a failure wait (0.25 s doubling to 8 s, jittered) and resend
  async function flush() {
    if (app.flushing) return;
    app.flushing = true;
    try {
      while (app.outbox.length) {
        const op = app.outbox[0];
        const outcome = await send(op);
        if (outcome.retry) {
          if (!app.trouble || app.trouble.detail !== outcome.detail) message(`not saved yet: ${outcome.detail}`, true);
          app.trouble = outcome;
          app.failures += 1;
          showSaveState();
          await pause(Math.min(8000, 125 * 2 ** Math.min(app.failures, 6)) * (0.75 + Math.random() / 2));
          app.wake = null;
          continue;
        }
        committed(op, outcome);
      }
    } finally {
      app.flushing = false;
      if (!app.outbox.length) app.drains.splice(0).forEach((resolve) => resolve());
    }
  }

  function committed(op, outcome) {
    const recovered = !!app.trouble;
    app.trouble = null;
    app.failures = 0;
    app.outbox.shift();
    stored("readwrite", (s) => s.delete(op.op_id));
    const resolve = app.waiters.get(op.op_id);
    app.waiters.delete(op.op_id);
    if (outcome.refused) refused(op, outcome.refused);
    else if (recovered) message("the server saves again: the answers kept in this browser are being sent");
    if (resolve) resolve(outcome.refused ? null : outcome.data);
    if (app.pair) { renderRows(); renderProgress(); }  // the row's status and the strip, nothing scrolled
    showSaveState();
  }

  // the server refused a change (it will never take it): say so, and show what the server holds
  function refused(op, text) {
    message(`not saved: ${text}`, true);
    if (op.path === "/api/checked") setChecked(op.body.pair_id, false);
    if (app.pair && op.body.pair_id === app.pair.pair_id) {
      app.busy = load(app.position, true).catch((err) => message(`not saved: ${text}; cannot reload the pair: ${err.message}`, true));
    }
  }

  function drained() {
    return app.outbox.length ? new Promise((resolve) => app.drains.push(resolve)) : Promise.resolve();
  }

  // the changes not yet committed, laid over a pair as the server sent it
  function overlay(data) {
    for (const op of app.outbox) {
      const b = op.body;
      if (b.pair_id !== data.pair_id) continue;
      if (op.path === "/api/answer") {
        let row = data.rows.find((r) => r.entity === b.entity);
        if (!row) {
          row = { entity: b.entity, engine: null, reference_evidence: "", candidate_evidence: "", reference_rules: "", candidate_rules: "", answer: null, added: true };
          data.rows.push(row);
        }
        row.answer = Object.fromEntries(FIELDS.map((f) => [f, b[f]]));
      } else if (op.path === "/api/remove") data.rows = data.rows.filter((r) => !(r.added && r.entity === b.entity));
      else if (op.path === "/api/note") data.note = b.note;
      else if (op.path === "/api/checked") data.checked = b.checked;
    }
  }

  function unsaved(pairId) {
    return new Set(app.outbox.filter((op) => op.body.pair_id === pairId && op.body.entity).map((op) => op.body.entity));
  }

  // -- rendering ------------------------------------------------------------------------------

  function highlight(node, text, spans) {
    // spans: [{evidence, entity}]; each evidence's first occurrence (case-insensitive) is marked
    const lower = text.toLowerCase();
    const marks = [];
    for (const s of spans) {
      if (!s.evidence) continue;
      const at = lower.indexOf(s.evidence.toLowerCase());
      if (at >= 0) marks.push({ start: at, end: at + s.evidence.length, entities: [s.entity] });
    }
    marks.sort((a, b) => a.start - b.start || b.end - a.end);
    const merged = [];
    for (const m of marks) {
      const last = merged[merged.length - 1];
      if (last && m.start < last.end) {
        last.end = Math.max(last.end, m.end);
        last.entities.push(...m.entities);
      } else merged.push({ ...m, entities: [...m.entities] });
    }
    node.replaceChildren();
    let pos = 0;
    const selected = app.rows[app.sel] ? app.rows[app.sel].entity : null;
    for (const m of merged) {
      if (m.start > pos) node.append(text.slice(pos, m.start));
      const mark = el("mark", { class: "ev" + (m.entities.includes(selected) ? " sel" : ""),
                                title: m.entities.map(name).join(", ") }, text.slice(m.start, m.end));
      mark.dataset.entities = m.entities.join(" ");
      node.append(mark);
      pos = m.end;
    }
    if (pos < text.length) node.append(text.slice(pos));
  }

  function name(id) { return app.entities[id] ? app.entities[id].name : id; }

  function renderReports() {
    const p = app.pair;
    highlight($("reference"), p.reference, app.rows.map((r) => ({ evidence: r.reference_evidence, entity: r.entity })));
    highlight($("candidate"), p.candidate, app.rows.map((r) => ({ evidence: r.candidate_evidence, entity: r.entity })));
    const row = app.rows[app.sel];
    for (const side of ["reference", "candidate"]) {
      // the rule engine's rules behind the selected entity's reading of this report, under it
      const rules = row ? row[side + "_rules"] || "" : "";
      const node = $(side + "-rules");
      node.hidden = !rules;
      node.textContent = rules ? `${name(row.entity)}: read by ${rules}` : "";
    }
  }

  function cell(value, changed) {
    return el("td", { class: (changed ? "changed" : "") + (value === "not-available" ? " na" : ""),
                      text: value === undefined ? "—" : (SHORT[value] || value), title: value || "" });
  }

  function renderRows() {
    const body = document.querySelector("#rows tbody");
    const pending = unsaved(app.pair.pair_id);
    body.replaceChildren();
    app.rows.forEach((r, i) => {
      const info = app.entities[r.entity] || { name: r.entity, group: "", critical: false };
      const head = el("td", {}, info.name, el("span", { class: "group", text: info.group }));
      if (info.critical) head.append(el("span", { class: "badge", text: "critical" }));
      if (r.added) head.append(el("span", { class: "badge added", text: "added by you" }));
      const eng = r.engine || app.implicit;
      const tr = el("tr", { "data-entity": r.entity, class: i === app.sel ? "selected" : "" }, head);
      for (const f of FIELDS) tr.append(cell(r.engine ? eng[f] : "—", false));
      for (const f of FIELDS) tr.append(cell(r.answer ? r.answer[f] : undefined, r.answer && r.answer[f] !== eng[f]));
      if (pending.has(r.entity)) tr.append(el("td", { class: "status unsaved", text: "● not saved yet" }));
      else tr.append(el("td", { class: "status" + (r.answer ? "" : " open"), text: r.answer ? "✓ saved" : "open" }));
      tr.addEventListener("click", () => { app.sel = i; render(); });
      body.append(tr);
    });
    if (!app.rows.length) {
      body.append(el("tr", {}, el("td", { colspan: "10", text: "The engine found no entity in either report. Add any it missed (+), then Enter." })));
    }
  }

  function renderProgress() {
    const checked = app.pairs.filter((p) => p.checked).length;
    $("who").textContent = reviewer;
    $("progress-text").textContent = `pair ${app.position} of ${app.pairs.length} · ${checked} checked · ${app.pairs.length - checked} to go`;
    $("progress-bar").style.width = `${(100 * checked) / Math.max(1, app.pairs.length)}%`;
    const strip = $("strip");
    const pending = new Set(app.outbox.map((op) => op.body.pair_id));
    strip.replaceChildren();
    for (const p of app.pairs) {
      const a = el("a", { href: "#", title: p.pair_id + (pending.has(p.pair_id) ? " (changes not saved yet)" : ""),
                          text: String(p.position),
                          class: (p.checked ? "checked" : "") + (p.position === app.position ? " current" : "")
                                 + (pending.has(p.pair_id) ? " unsaved" : "") });
      a.addEventListener("click", (ev) => { ev.preventDefault(); load(p.position); });
      strip.append(a);
    }
  }

  function render() {
    if (!app.pair) return;
    const p = app.pair;
    $("pair-title").replaceChildren(`Pair ${p.position}: ${p.pair_id}`,
      el("span", { class: "stratum", text: p.checked ? "checked ✓" : "open" }));
    renderReports();
    renderRows();
    renderProgress();
    const row = document.querySelector("#rows tbody tr.selected");
    if (row) row.scrollIntoView({ block: "nearest" });
  }

  // -- actions ----------------------------------------------------------------------------------

  // a pair as the server holds it, with the changes not yet committed laid over it; ``keep``: the
  // same pair again (after a refusal), keeping the selected entity and the message
  async function load(position, keep) {
    const data = await request(`/api/pair/${position}`);
    overlay(data);
    const selected = keep && app.rows[app.sel] ? app.rows[app.sel].entity : null;
    app.position = position;
    app.pair = data;
    app.rows = data.rows;
    const at = app.rows.findIndex((r) => (selected ? r.entity === selected : !r.answer));
    app.sel = Math.max(0, keep && at < 0 ? Math.min(app.sel, app.rows.length - 1) : at);
    $("note").value = data.note;
    if (!keep) message("");
    render();
    return data;
  }

  function setChecked(pairId, value) {
    const p = app.pairs.find((x) => x.pair_id === pairId);
    if (p) p.checked = value;
    if (app.pair && app.pair.pair_id === pairId) app.pair.checked = value;
  }

  function markPairChecked(value) {
    if (app.pair) setChecked(app.pair.pair_id, value);
  }

  function answer(row, values) {
    row.answer = values;
    markPairChecked(false);
    render();
    return post("/api/answer", { reviewer, pair_id: app.pair.pair_id, entity: row.entity, ...values });
  }

  function accept() {
    const row = app.rows[app.sel];
    if (!row) return;
    if (!row.engine) { message(`${name(row.entity)} was added by you: correct it with p / l / s / c.`); return; }
    answer(row, { ...row.engine });
    if (app.sel < app.rows.length - 1) app.sel += 1;
    render();
  }

  function cycle(field) {
    const row = app.rows[app.sel];
    if (!row) return;
    const info = app.entities[row.entity];
    if (field !== "presence" && info && !info.attributes.includes(field)) {
      message(`${info.name} has no ${field} in the ontology.`, true);
      return;
    }
    const base = { ...(row.answer || row.engine || app.implicit) };
    const values = VALUES[field];
    base[field] = values[(values.indexOf(base[field]) + 1) % values.length];
    message(`${name(row.entity)}: ${field} → ${base[field]}`);
    answer(row, base);
  }

  function openAdd() {
    $("add-box").hidden = false;
    $("add-input").value = "";
    $("add-input").focus();
  }

  function addEntity(text) {
    const wanted = text.trim().toLowerCase();
    const found = Object.values(app.entities).find((e) => e.name.toLowerCase() === wanted || e.id === wanted);
    if (!found) { message(`no entity named "${text}"`, true); return false; }
    if (app.rows.some((r) => r.entity === found.id)) {
      app.sel = app.rows.findIndex((r) => r.entity === found.id);
      message(`${found.name} is already listed: correct it there.`);
      render();
      return true;
    }
    const row = { entity: found.id, engine: null, reference_evidence: "", candidate_evidence: "", reference_rules: "", candidate_rules: "", answer: null, added: true };
    app.rows.push(row);
    app.sel = app.rows.length - 1;
    message(`added ${found.name} (presence FN: correct it with p)`);
    answer(row, { ...app.implicit, presence: "FN" });
    return true;
  }

  function removeAdded() {
    const row = app.rows[app.sel];
    if (!row || !row.added) { message("only entities you added can be removed", true); return; }
    app.rows.splice(app.sel, 1);
    app.sel = Math.max(0, Math.min(app.sel, app.rows.length - 1));
    markPairChecked(false);
    render();
    post("/api/remove", { reviewer, pair_id: app.pair.pair_id, entity: row.entity });
  }

  // the pair is checked: shown at once (kept like any answer), withdrawn if the server refuses it
  async function checkPair() {
    const open = app.rows.filter((r) => !r.answer);
    if (open.length) {
      app.sel = app.rows.indexOf(open[0]);
      render();
      message(`${open.length} entities still open: answer them first (a accepts).`, true);
      return;
    }
    const position = app.position;
    markPairChecked(true);
    post("/api/checked", { reviewer, pair_id: app.pair.pair_id, checked: true });
    const next = app.pairs.find((x) => !x.checked && x.position > position) || app.pairs.find((x) => !x.checked);
    if (next) await load(next.position);
    else { render(); message("Every pair is checked. Thank you!"); }
  }

  function saveNote() {
    const saving = "note kept; saving…";
    app.pair.note = $("note").value;
    post("/api/note", { reviewer, pair_id: app.pair.pair_id, note: $("note").value }).then((data) => {
      if (data && $("message").textContent === saving) message("note saved");
    });
    message(saving);
    $("note").blur();
  }

  function onKey(ev) {
    if (!app.pair || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const target = ev.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA")) return;
    const k = ev.key;
    let handled = true;
    if (k === "ArrowDown" || k === "j") { app.sel = Math.min(app.rows.length - 1, app.sel + 1); render(); }
    else if (k === "ArrowUp" || k === "k") { app.sel = Math.max(0, app.sel - 1); render(); }
    else if (k === "a") accept();
    else if (KEY_FIELD[k]) cycle(KEY_FIELD[k]);
    else if (k === "+" || k === "=") openAdd();
    else if (k === "x") removeAdded();
    else if (k === "n") $("note").focus();
    else if (k === "Enter") app.busy = checkPair();
    else if ((k === "]" || k === "ArrowRight") && app.position < app.pairs.length) app.busy = load(app.position + 1);
    else if ((k === "[" || k === "ArrowLeft") && app.position > 1) app.busy = load(app.position - 1);
    else handled = false;
    if (handled) ev.preventDefault();
  }

  async function start() {
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$/.test(reviewer)) {
      $("login").hidden = false;
      $("save-state").textContent = "";
      $("login-name").focus();
      $("login").addEventListener("submit", (ev) => {
        ev.preventDefault();
        const next = new URLSearchParams(location.search);
        next.set("reviewer", $("login-name").value.trim());
        location.search = next.toString();
      });
      return;
    }
    $("review").hidden = false;
    const state = await request("/api/state");
    app.sample = state.sample_id;
    app.pairs = state.pairs;
    app.implicit = state.implicit;
    for (const e of state.entities) app.entities[e.id] = e;
    $("entity-list").replaceChildren(...state.entities.map((e) => el("option", { value: e.name })));
    await openStore();
    app.outbox = await loadOutbox();  // changes an earlier visit could not save: shown, and sent first
    app.counter = app.outbox.reduce((m, op) => Math.max(m, op.n + 1), 0);
    for (const op of app.outbox) if (op.path === "/api/checked") setChecked(op.body.pair_id, op.body.checked);
    const first = app.pairs.find((p) => !p.checked) || app.pairs[0];
    await load(first.position);
    if (app.outbox.length) message(`${app.outbox.length} answers from an earlier visit are not saved yet: sending them now`);
    showSaveState();
    flush();
    document.addEventListener("keydown", onKey);
    $("add-input").addEventListener("keydown", (ev) => {
      // blur before hiding: a hidden input keeps the focus until the next frame, and would eat the next key
      if (ev.key === "Enter") { ev.preventDefault(); if (addEntity(ev.target.value)) { ev.target.blur(); $("add-box").hidden = true; } }
      else if (ev.key === "Escape") { ev.preventDefault(); ev.target.blur(); $("add-box").hidden = true; }
    });
    $("note").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); saveNote(); }
      else if (ev.key === "Escape") { ev.preventDefault(); $("note").value = app.pair.note; $("note").blur(); }
    });
    app.ready = true;
  }

  // a tab closed (or reloaded) with changes not yet committed: the browser asks first (they are
  // kept in IndexedDB all the same, and sent when the page is opened again)
  window.addEventListener("beforeunload", (ev) => {
    if (!app.outbox.length) return;
    ev.preventDefault();
    ev.returnValue = "";
  });
  window.addEventListener("online", () => { if (app.wake) app.wake(); });

  // for tests and tools: resolves once every answer given so far is committed and the page settled
  window.cxrReview = {
    idle: async () => { await app.busy; await drained(); await app.busy; return app.outbox.length; },
    state: () => ({ position: app.position, pair_id: app.pair && app.pair.pair_id, sel: app.sel,
                    entity: app.rows[app.sel] && app.rows[app.sel].entity, rows: app.rows, ready: !!app.ready,
                    checked: app.pairs.filter((p) => p.checked).length, unsaved: app.outbox.length,
                    kept: app.kept, trouble: app.trouble && app.trouble.detail }),
  };
  document.addEventListener("DOMContentLoaded", () => {
    start().catch((err) => { message(`cannot load the review: ${err.message}`, true); });
  });
})();
