// cxreval review page: keyboard-first checking of the engine's judgements.
// Served by `cxreval review serve`; talks only to the server that served it. Every answer is
// POSTed the moment it is given, in order, and retried until the server has committed it.
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

  const app = {
    entities: {}, implicit: null, pairs: [], position: 0, pair: null, rows: [], sel: 0,
    queue: Promise.resolve(), waiting: 0,
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

  async function request(path, body) {
    const headers = { "X-Review-Token": token };
    const init = { headers, cache: "no-store" };
    if (body !== undefined) {
      init.method = "POST";
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const sep = path.includes("?") ? "&" : "?";
    const resp = await fetch(`${path}${sep}reviewer=${encodeURIComponent(reviewer)}`, init);
    const data = await resp.json().catch(() => ({}));
    if (!resp.ok) {
      const err = new Error(data.error || `HTTP ${resp.status}`);
      err.status = resp.status;
      throw err;
    }
    return data;
  }

  function showSaveState() {
    const s = $("save-state");
    s.textContent = app.waiting ? `saving… (${app.waiting} waiting)` : "all answers saved";
    s.classList.toggle("unsaved", app.waiting > 0 && app.offline);
    if (app.offline && app.waiting) s.textContent = `server unreachable: ${app.waiting} answers kept, retrying`;
  }

  // POST in order; a network failure is retried (the answer stays queued, shown as unsaved);
  // a refusal (4xx) is shown and dropped.
  function post(path, body) {
    app.waiting += 1;
    showSaveState();
    const run = async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          const data = await request(path, body);
          app.offline = false;
          return data;
        } catch (err) {
          if (err.status) { message(err.message, true); return null; }
          app.offline = true;
          showSaveState();
          await new Promise((r) => setTimeout(r, Math.min(2000, 200 * (attempt + 1))));
        }
      }
    };
    const done = app.queue.then(run);
    app.queue = done.then(() => { app.waiting -= 1; showSaveState(); });
    return done;
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
  }

  function cell(value, changed) {
    return el("td", { class: (changed ? "changed" : "") + (value === "not-available" ? " na" : ""),
                      text: value === undefined ? "—" : (SHORT[value] || value), title: value || "" });
  }

  function renderRows() {
    const body = document.querySelector("#rows tbody");
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
      tr.append(el("td", { class: "status" + (r.answer ? "" : " open"), text: r.answer ? "✓ answered" : "open" }));
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
    strip.replaceChildren();
    for (const p of app.pairs) {
      const a = el("a", { href: "#", title: p.pair_id, text: String(p.position),
                          class: (p.checked ? "checked" : "") + (p.position === app.position ? " current" : "") });
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

  async function load(position) {
    const data = await request(`/api/pair/${position}`);
    app.position = position;
    app.pair = data;
    app.rows = data.rows;
    app.sel = Math.max(0, app.rows.findIndex((r) => !r.answer));
    $("note").value = data.note;
    message("");
    render();
    return data;
  }

  function markPairChecked(value) {
    const p = app.pairs.find((x) => x.position === app.position);
    if (p) p.checked = value;
    if (app.pair) app.pair.checked = value;
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
    const row = { entity: found.id, engine: null, reference_evidence: "", candidate_evidence: "", answer: null, added: true };
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

  async function checkPair() {
    const open = app.rows.filter((r) => !r.answer);
    if (open.length) {
      app.sel = app.rows.indexOf(open[0]);
      render();
      message(`${open.length} entities still open: answer them first (a accepts).`, true);
      return;
    }
    const position = app.position;
    const done = await post("/api/checked", { reviewer, pair_id: app.pair.pair_id, checked: true });
    if (!done) return;
    const p = app.pairs.find((x) => x.position === position);
    if (p) p.checked = true;
    const next = app.pairs.find((x) => !x.checked && x.position > position) || app.pairs.find((x) => !x.checked);
    if (next) await load(next.position);
    else { if (app.pair) app.pair.checked = true; render(); message("Every pair is checked. Thank you!"); }
  }

  function saveNote() {
    app.pair.note = $("note").value;
    post("/api/note", { reviewer, pair_id: app.pair.pair_id, note: $("note").value });
    message("note saved");
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
    app.pairs = state.pairs;
    app.implicit = state.implicit;
    for (const e of state.entities) app.entities[e.id] = e;
    $("entity-list").replaceChildren(...state.entities.map((e) => el("option", { value: e.name })));
    const first = app.pairs.find((p) => !p.checked) || app.pairs[0];
    await load(first.position);
    showSaveState();
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

  // for tests and tools: resolves once every answer given so far is committed and the page settled
  window.cxrReview = {
    idle: async () => { await app.busy; await app.queue; await app.busy; return app.waiting; },
    state: () => ({ position: app.position, pair_id: app.pair && app.pair.pair_id, sel: app.sel,
                    entity: app.rows[app.sel] && app.rows[app.sel].entity, rows: app.rows, ready: !!app.ready,
                    checked: app.pairs.filter((p) => p.checked).length }),
  };
  document.addEventListener("DOMContentLoaded", () => {
    start().catch((err) => { message(`cannot load the review: ${err.message}`, true); });
  });
})();
