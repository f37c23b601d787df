// ticklock's dashboard: plain JavaScript, no build step, no library. Every read and every action goes through
// the REST API of the page's own origin (the same calls, the same validation), with the bearer token kept in
// the tab's sessionStorage (never in a URL). Pages: #/ overview, #/jobs, #/jobs/<id>, #/new, #/jobs/<id>/edit.
"use strict";

const TOKEN_KEY = "ticklock.token";
const FINAL = ["success", "failed", "timeout", "lost", "cancelled"];
const COLOURS = ["success", "failed", "timeout", "lost", "cancelled", "running", "skipped", "missed"];
// a job's states (one at a time) and conditions (on top): the API decides them (domain/states.py)
const STATES = ["enabled", "paused", "held", "disabled", "done"];
const CONDITIONS = ["failing", "alerting"];
let refresh = null; // the current page's refresh timer
let signedIn = false; // a token was given and accepted: "Log out" is offered
let soon = { id: null, until: 0 }; // a job page refreshed each second until then (a trigger's run shows)
let generation = 0; // which route() is current: a page drawn for an older one is dropped, its timer dies

// -- DOM --------------------------------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}
const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, String(value));
  for (const child of children.flat()) if (child) el.append(child instanceof Node ? child : document.createTextNode(child));
  return el;
}
const main = () => document.getElementById("main");
function show(...nodes) {
  const m = main();
  m.replaceChildren(...nodes.flat(Infinity));
}
function toast(text, bad = false) {
  const el = h("div", { class: bad ? "toast bad" : "toast" }, text);
  document.getElementById("toasts").append(el);
  setTimeout(() => el.remove(), bad ? 9000 : 4000);
}

// -- time -------------------------------------------------------------------------------------------
function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC");
}
function ago(iso) {
  if (!iso) return "—";
  const seconds = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  const abs = Math.abs(seconds);
  const [n, unit] = abs < 60 ? [abs, "s"] : abs < 3600 ? [Math.round(abs / 60), "min"]
    : abs < 86400 ? [Math.round(abs / 3600), "h"] : [Math.round(abs / 86400), "d"];
  return seconds >= 0 ? `in ${n} ${unit}` : `${n} ${unit} ago`;
}
const timeEl = (iso) => (iso ? h("time", { datetime: iso, title: when(iso) }, ago(iso)) : "—");
const isoZ = (date) => date.toISOString().replace(/\.\d{3}Z$/, "Z");
function seconds(value) {
  if (value === null || value === undefined) return "—";
  return value < 1 ? `${Math.round(value * 1000)} ms` : `${value.toFixed(value < 10 ? 2 : 1)} s`;
}

// -- the API ----------------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.details = (body && body.details) || [];
  }
}
async function api(method, path, body) {
  const headers = { accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    throw new ApiError(0, { message: `the API did not answer (${err.message})` });
  }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (response.status === 401) {
    login(token ? "That token was refused." : null);
    throw new ApiError(401, data);
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}
const query = (params) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
  const text = q.toString();
  return text ? `?${text}` : "";
};
const names = new Map(); // job id -> name, for the lists that carry only ids
async function jobName(id) {
  if (!names.has(id)) names.set(id, api("GET", `/jobs/${encodeURIComponent(id)}`).then((j) => j.name, () => id));
  return names.get(id);
}

// -- the login form ------------------------------------------------------------------------------------
// Whether this API takes the page's token (or needs none): /health is open and answers its details only
// to a caller it accepts, so the page learns it without a refused request.
async function accepted(token) {
  const headers = { accept: "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  try {
    const body = await (await fetch("/health", { headers })).json();
    return !(body && typeof body.status === "string" && !("store" in body)); // the short answer: refused
  } catch (err) {
    return true; // no health answer: the page's own calls will say what is wrong
  }
}
let loggingIn = false;
function login(problem) {
  if (loggingIn) return;
  loggingIn = true;
  stopRefresh();
  generation += 1; // what was being drawn is dropped: the form stays
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "current-password",
    required: true, "aria-describedby": "token-hint" });
  const error = h("p", { class: "form-error", role: "alert" }, problem || "");
  signedIn = false;
  document.getElementById("logout").hidden = true;
  const form = h("form", { class: "panel login", onsubmit: async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!(await accepted(token))) {
      error.textContent = "That token was refused.";
      input.select();
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    signedIn = true;
    loggingIn = false;
    route();
  } },
  h("h1", {}, "Log in"),
  h("p", { class: "muted", id: "token-hint" }, "This ticklock asks for its API token (TICKLOCK_API_TOKEN). It is kept in this tab's session storage only."),
  error,
  h("div", { class: "field" }, h("label", { for: "token" }, "API token"), input),
  h("div", { class: "actions" }, h("button", { class: "primary", type: "submit" }, "Log in")));
  show(form);
  input.focus();
}

// -- dialogs ------------------------------------------------------------------------------------------
// ask(title, text, fields, confirm) -> the fields' values, or null when cancelled
function ask(title, text, fields = [], confirm = "OK", danger = false) {
  const dialog = document.getElementById("dialog");
  const form = document.getElementById("dialog-form");
  const inputs = fields.map((f) => h("input", { id: `ask-${f.name}`, name: f.name, type: f.type || "text",
    value: f.value || "", placeholder: f.placeholder || "", min: f.min, required: f.required }));
  form.replaceChildren(
    h("h2", {}, title),
    text ? h("p", {}, text) : null,
    ...fields.map((f, i) => h("div", { class: "field" }, h("label", { for: `ask-${f.name}` }, f.label), inputs[i],
      f.hint ? h("div", { class: "hint" }, f.hint) : null)),
    h("div", { class: "actions" },
      h("button", { value: "cancel", type: "submit", formnovalidate: true }, "Cancel"),
      h("button", { value: "ok", type: "submit", class: danger ? "primary danger-fill" : "primary", id: "ask-ok" }, confirm)));
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      if (dialog.returnValue !== "ok") return resolve(null);
      resolve(Object.fromEntries(fields.map((f, i) => [f.name, inputs[i].value])));
    }, { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    (inputs[0] || document.getElementById("ask-ok")).focus();
  });
}

// -- shared pieces ---------------------------------------------------------------------------------------
function badge(text, kind) {
  return h("span", { class: `badge ${kind || text}` }, text);
}
// the job's state, then each condition, as the API says them
function stateBadges(job) {
  return h("span", { class: "states", dataset: { state: job.state } },
    badge(job.state), (job.conditions || []).map((c) => [" ", badge(c)]));
}
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
function scheduleWritten(schedule) {
  if (schedule.kind === "cron") return schedule.expr;
  if (schedule.kind === "interval") return `every ${schedule.seconds} s`;
  return `once at ${schedule.at}`;
}
function legend(kinds) {
  return h("div", { class: "legend" }, kinds.map((k) => h("span", {}, h("i", { class: k }), k)));
}
function failed(err) {
  show(h("div", { class: "panel" }, h("h1", {}, "Something went wrong"), h("p", { role: "alert" }, err.message)));
}
function stopRefresh() {
  if (refresh) clearTimeout(refresh);
  refresh = null;
}
// draw `nodes` unless the route changed since `mine` (a slow answer must not paint over another page)
function showFor(mine, ...nodes) {
  if (mine === generation) show(...nodes);
  return mine === generation;
}
// run `page` again in `ms`, once, if the route is still `mine` (one timer at a time, never piling up)
function again(mine, ms, page) {
  stopRefresh();
  refresh = setTimeout(() => {
    if (mine === generation && !document.querySelector("dialog[open]")) page().catch(() => {});
    else if (mine === generation) again(mine, ms, page);
  }, ms);
}

// a fire by its slot, as the jobs table and the fires below list it; a jittered start said beside it
function nextFireText(fire) {
  const jitter = (Date.parse(fire.starts_at) - Date.parse(fire.at)) / 1000;
  return [when(fire.at), jitter ? h("span", { class: "muted small" }, ` (starts ${jitter.toFixed(3)} s later: jitter)`) : null];
}

// -- overview -------------------------------------------------------------------------------------------
async function overview() {
  const mine = generation;
  const data = await api("GET", "/overview");
  const cards = h("div", { class: "cards" },
    h("a", { class: "card", href: "#/jobs" }, h("span", { class: "n" }, data.jobs.total), h("span", { class: "label" }, "jobs")),
    [...STATES, ...CONDITIONS].map((state) => h("a", { class: `card ${CONDITIONS.includes(state) && data.jobs[state] ? "bad" : ""}`,
      href: `#/jobs?state=${state}`, dataset: { state } },
    h("span", { class: "n" }, data.jobs[state]), h("span", { class: "label" }, state))));
  const failures = await Promise.all(data.failures.map(async (e) => ({ ...e, name: await jobName(e.job_id) })));
  const drawn = showFor(mine,
    h("div", { class: "title-row" }, h("div", {}, h("h1", {}, "Overview"),
      h("p", { class: "muted small" }, `as of ${when(data.now)}, refreshed every 10 s`))),
    cards,
    h("section", { class: "panel", "aria-labelledby": "activity-h" },
      h("h2", { id: "activity-h" }, `Fires per minute, last ${data.window} minutes`),
      activityChart(data.activity, data.step), legend(COLOURS)),
    h("div", { class: "grid" },
      h("section", { class: "panel", "aria-labelledby": "lag-h" }, h("h2", { id: "lag-h" }, "Dispatch lag"),
        h("dl", { class: "facts" },
          h("dt", {}, "p50"), h("dd", { id: "lag-p50" }, seconds(data.lag.p50)),
          h("dt", {}, "p99"), h("dd", { id: "lag-p99" }, seconds(data.lag.p99)),
          h("dt", {}, "max"), h("dd", {}, seconds(data.lag.max)),
          h("dt", {}, "of"), h("dd", {}, `the latest ${data.lag.sample} runs`))),
      h("section", { class: "panel", "aria-labelledby": "alerts-h" }, h("h2", { id: "alerts-h" }, "Open alerts"),
        data.alerts.length ? h("ul", { id: "alerts" }, data.alerts.map((a) => h("li", {},
          h("a", { href: `#/jobs/${a.job_id}` }, a.job_name), " ", badge(a.condition, "alerting"), " ", a.detail, " ",
          h("span", { class: "muted small" }, timeEl(a.raised_at)))))
          : h("p", { class: "muted" }, "None."),
        alertsCut(data))),
    h("section", { class: "panel", "aria-labelledby": "failures-h" }, h("h2", { id: "failures-h" }, "Latest failures"),
      failures.length ? h("div", { class: "table-wrap" }, h("table", { id: "failures" },
        h("thead", {}, h("tr", {}, h("th", {}, "Job"), h("th", {}, "Status"), h("th", {}, "Fire"), h("th", {}, "Error"))),
        h("tbody", {}, failures.map((e) => h("tr", {},
          h("td", {}, h("a", { href: `#/jobs/${e.job_id}` }, e.name)), h("td", {}, badge(e.status)),
          h("td", {}, timeEl(e.scheduled_at)), h("td", {}, h("pre", { class: "error-text" }, e.error || "")))))))
        : h("p", { class: "muted" }, "No failed, timed-out or lost run in the last day.")));
  if (drawn) again(mine, 10000, overview);
}

// the overview lists the alerts of the first jobs by name: say how many jobs alert beyond them, and where
function alertsCut(data) {
  const shown = new Set(data.alerts.map((a) => a.job_id)).size;
  const more = data.jobs.alerting - shown;
  if (more <= 0) return null;
  return h("p", { class: "small", id: "alerts-more" },
    h("a", { href: "#/jobs?state=alerting" }, `${more} more ${more === 1 ? "job" : "jobs"} alerting`));
}

function activityChart(steps, step) {
  const width = 720, height = 160, pad = 28;
  const totals = steps.map((st) => Object.values(st.counts).reduce((a, b) => a + b, 0));
  const top = Math.max(1, ...totals);
  const bar = (width - pad) / Math.max(1, steps.length);
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", id: "activity",
    "aria-label": `fires per step: ${totals.reduce((a, b) => a + b, 0)} in the window, at most ${top} in one step` });
  svg.append(s("line", { class: "axis", x1: pad, y1: height - 18, x2: width, y2: height - 18 }));
  svg.append(s("text", { x: 0, y: 12 }, String(top)), s("text", { x: 0, y: height - 20 }, "0"));
  steps.forEach((st, i) => {
    let y = height - 18;
    const x = pad + i * bar;
    for (const kind of COLOURS) {
      const n = st.counts[kind] || 0;
      if (!n) continue;
      const tall = ((height - 40) * n) / top;
      y -= tall;
      svg.append(s("rect", { x: x + 1, y, width: Math.max(1, bar - 2), height: tall, fill: `var(--${kind})` },
        s("title", {}, `${when(st.at)}: ${kind} ${n}`)));
    }
    if (i % Math.ceil(steps.length / 6) === 0) {
      svg.append(s("text", { x, y: height - 4 }, new Date(st.at).toISOString().slice(11, 16)));
    }
  });
  return svg;
}

// -- jobs ---------------------------------------------------------------------------------------------------
const SORTS = { name: "Name", next_run_at: "Next fire", last_at: "Last run" };
async function jobs(params) {
  const mine = generation;
  const selected = new Set();
  const handlers = await api("GET", "/handlers").catch(() => []);
  const limit = Number(params.get("limit")) || 50;
  const q = { q: params.get("q"), state: params.get("state"), handler: params.get("handler"),
    outcome: params.get("outcome"), sort: params.get("sort") || "name", limit, after: params.get("after") };
  const page = await api("GET", `/jobs${query(q)}`);
  // the address holds this page's cursor only (it stays one size, to share or reload); the cursors back to
  // the first page are kept in the tab's history state
  const back = (history.state && Array.isArray(history.state.back)) ? history.state.back : [];
  const go = (changes, stack = []) => {
    const next = new URLSearchParams(params);
    next.delete("prev"); // an address from before kept every cursor here
    for (const [k, v] of Object.entries(changes)) (v ? next.set(k, v) : next.delete(k));
    if (!("after" in changes)) next.delete("after");
    history.pushState({ back: stack }, "", `#/jobs${next.toString() ? "?" + next : ""}`);
    route();
  };
  const search = h("input", { type: "search", id: "search", placeholder: "Search name or handler", value: q.q || "",
    "aria-label": "search jobs by name or handler" });
  let typing;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => go({ q: search.value.trim() }), 300);
  });
  const select = (name, label, options) => h("select", { id: `filter-${name}`, "aria-label": label,
    onchange: (event) => go({ [name]: event.target.value }) },
  h("option", { value: "" }, label), options.map((o) => h("option", { value: o, selected: q[name] === o }, o)));
  const bulkButtons = [
    ["pause", "Pause"], ["resume", "Resume"], ["trigger", "Trigger"], ["delete", "Delete"],
  ].map(([action, label]) => h("button", { type: "button", disabled: true, dataset: { bulk: action },
    class: action === "delete" ? "danger" : "", onclick: () => bulk(action, [...selected]) }, label));
  const count = h("span", { class: "muted small", id: "selected-count" }, "none selected");
  const onSelect = () => {
    count.textContent = selected.size ? `${selected.size} selected` : "none selected";
    for (const b of bulkButtons) b.disabled = selected.size === 0;
  };
  const boxes = page.items.map((job) => h("input", { type: "checkbox", "aria-label": `select ${job.name}`,
    dataset: { job: job.id }, onchange: (event) => {
      event.target.checked ? selected.add(job.id) : selected.delete(job.id);
      onSelect();
    } }));
  const all = h("input", { type: "checkbox", "aria-label": "select every job on this page", onchange: (event) => {
    for (const box of boxes) {
      box.checked = event.target.checked;
      event.target.checked ? selected.add(box.dataset.job) : selected.delete(box.dataset.job);
    }
    onSelect();
  } });
  const sortHeader = (key) => {
    const current = q.sort.replace(/^-/, "") === key;
    const descending = current && q.sort.startsWith("-");
    return h("th", { "aria-sort": current ? (descending ? "descending" : "ascending") : "none" },
      h("button", { type: "button", class: "sort", "aria-pressed": current, dataset: { sort: key },
        onclick: () => go({ sort: current && !descending ? `-${key}` : key }) },
      SORTS[key], current ? (descending ? " ▼" : " ▲") : ""));
  };
  const rows = page.items.map((job, i) => h("tr", { dataset: { job: job.id } },
    h("td", {}, boxes[i]),
    h("td", {}, h("a", { href: `#/jobs/${job.id}` }, job.name)),
    h("td", { class: "hide-sm" }, h("code", {}, job.handler)),
    h("td", {}, job.schedule_text, h("div", { class: "muted small mono" }, scheduleWritten(job.schedule))),
    h("td", { class: "hide-sm" }, job.schedule.timezone || "UTC"),
    h("td", {}, ["enabled", "held"].includes(job.state) ? timeEl(job.next_run_at) : "—"),
    h("td", {}, job.last_run ? [badge(job.last_run.status), " ", h("span", { class: "small" }, timeEl(job.last_run.at))] : h("span", { class: "muted" }, "never")),
    h("td", { class: "num hide-sm" }, job.last_run ? `${Math.round(job.last_run.success_rate * 100)}%` : "—"),
    h("td", {}, stateBadges(job))));
  // Previous: the page before, or the first page when the way back is not known (an address shared)
  const pager = h("div", { class: "pager" },
    h("button", { type: "button", id: "prev", disabled: !params.get("after"), onclick: () =>
      go({ after: back.length ? back[back.length - 1] : null }, back.slice(0, -1)) },
    back.length || !params.get("after") ? "← Previous" : "← First page"),
    h("button", { type: "button", id: "next", disabled: !page.next, onclick: () =>
      go({ after: page.next }, [...back, params.get("after") || ""]) }, "Next →"));
  showFor(mine,
    h("div", { class: "title-row" }, h("div", {}, h("h1", {}, "Jobs")),
      h("a", { class: "button primary", href: "#/new" }, "New job")),
    h("div", { class: "filters", role: "search" }, search,
      select("state", "any state", [...STATES, ...CONDITIONS]),
      select("outcome", "any last outcome", ["none", ...FINAL]),
      select("handler", "any handler", handlers.map((x) => x.name))),
    h("div", { class: "bulk", "aria-label": "actions on the selected jobs" }, count, bulkButtons),
    page.items.length ? h("div", { class: "table-wrap" }, h("table", { id: "jobs" },
      h("thead", {}, h("tr", {}, h("th", {}, all), sortHeader("name"), h("th", { class: "hide-sm" }, "Handler"),
        h("th", {}, "Schedule"), h("th", { class: "hide-sm" }, "Timezone"), sortHeader("next_run_at"),
        sortHeader("last_at"), h("th", { class: "num hide-sm" }, "Success"), h("th", {}, "State"))),
      h("tbody", {}, rows)))
      : h("div", { class: "panel empty" }, "No job matches.", " ", h("a", { href: "#/new" }, "Create one")),
    pager);
  if (q.q) {
    search.focus();
    search.setSelectionRange(search.value.length, search.value.length);
  }
}

async function bulk(action, ids) {
  const verbs = { pause: "Pause", resume: "Resume", trigger: "Trigger", delete: "Delete" };
  const noun = ids.length === 1 ? "job" : "jobs";
  const ok = await ask(`${verbs[action]} ${ids.length} ${noun}?`,
    action === "delete" ? `This deletes ${ids.length} ${noun} and their history. It cannot be undone.` : null,
    [], `${verbs[action]} ${ids.length} ${noun}`, action === "delete");
  if (!ok) return;
  const call = (id) => {
    const path = `/jobs/${encodeURIComponent(id)}`;
    return action === "delete" ? api("DELETE", path) : api("POST", `${path}/${action}`);
  };
  const results = await Promise.allSettled(ids.map(call));
  const bad = results.filter((r) => r.status === "rejected");
  if (bad.length) toast(`${ids.length - bad.length} done, ${bad.length} refused: ${bad[0].reason.message}`, true);
  else toast(`${verbs[action]}: ${ids.length} ${noun} done`);
  route();
}

// -- one job ------------------------------------------------------------------------------------------------
async function job(id) {
  const mine = generation;
  const path = `/jobs/${encodeURIComponent(id)}`;
  const monthAgo = isoZ(new Date(Date.now() - 30 * 86400 * 1000));
  const [j, upcoming, fires, runs] = await Promise.all([
    api("GET", path), api("GET", `${path}/upcoming?count=20`).catch(() => ({ fires: [], timezone: "UTC" })),
    api("GET", `${path}/fires${query({ from: monthAgo, limit: 200 })}`).catch(() => ({ items: [] })),
    api("GET", `${path}/executions?limit=200`),
  ]);
  const act = async (label, call) => {
    try {
      await call();
      toast(label);
      route();
    } catch (err) {
      if (err.status !== 401) toast(err.message, true);
    }
  };
  const zoned = upcoming.timezone !== "UTC";
  // the first fire that will run, from the same list as the table below (the page never contradicts itself)
  const nextFire = upcoming.fires.find((f) => f.status === "due" || f.status === "running");
  const pausable = ["enabled", "held"].includes(j.state); // a held job may be paused until resumed instead
  const resumable = ["paused", "held", "disabled"].includes(j.state);
  const buttons = h("div", { class: "actions" },
    resumable ? h("button", { type: "button", id: "resume", onclick: () => act("Resumed", () => api("POST", `${path}/resume`)) },
      j.state === "held" ? "Resume now" : "Resume") : null,
    pausable ? h("button", { type: "button", id: "pause", onclick: async () => {
      const v = await ask(`Pause ${j.name}?`, "Its fires are recorded as paused until it is resumed (or until the instant you give).",
        [{ name: "note", label: "Note (why, for whoever looks next)" },
          { name: "until", label: "Until (optional, RFC 3339)", placeholder: "2026-12-24T08:00:00Z" }], "Pause");
      if (v) act("Paused", () => api("POST", `${path}/pause`, { note: v.note || null, until: v.until || null }));
    } }, "Pause") : null,
    h("button", { type: "button", id: "trigger", onclick: () => {
      soon = { id: j.id, until: Date.now() + 15000 };
      act("Triggered: a run is due now", () => api("POST", `${path}/trigger`));
    } }, "Trigger now"),
    h("button", { type: "button", id: "backfill", onclick: () => backfill(j) }, "Backfill…"),
    h("a", { class: "button", id: "edit", href: `#/jobs/${j.id}/edit` }, "Edit"),
    h("button", { type: "button", class: "danger", id: "delete", onclick: async () => {
      if (await ask(`Delete ${j.name}?`, "This deletes the job and its history. It cannot be undone.", [], "Delete", true)) {
        act("Deleted", async () => {
          await api("DELETE", path);
          location.hash = "#/jobs";
        });
      }
    } }, "Delete"));
  // the fires that happened (ran, or did not with a reason); not the ones to come, nor slots before the job
  const past = fires.items.filter((f) => ["ran", "skipped", "missed", "paused", "unaccounted"].includes(f.status))
    .slice(0, 200).reverse();
  const strip = h("div", { class: "strip", id: "strip", role: "list", "aria-label": `the last ${past.length} fires, oldest first` },
    past.map((f) => {
      const kind = f.status === "ran" ? (f.execution_status || "running") : f.status;
      const text = `${when(f.at)}: ${f.status === "ran" ? kind : f.status}${f.reason ? ` (${f.reason})` : ""}${f.trigger !== "schedule" ? `, ${f.trigger}` : ""}`;
      return h("span", { class: kind, title: text, role: "listitem", "aria-label": text, dataset: { status: kind } });
    }));
  // what holds the job back, in the words of its state's badge
  const holding = j.state === "held" && j.hold ? (j.hold.kind === "skip"
    ? `Held until ${when(j.hold.resumes_at)}: skipping its next ${plural(j.hold.count, "fire", "fires")}.`
    : `Held until ${when(j.hold.resumes_at)}: paused until then.`)
    : j.state === "paused" ? "Paused until resumed." : null;
  const hold = holding ? h("p", { class: "small", id: "hold" }, holding, j.hold && j.hold.note ? ` “${j.hold.note}”` : "") : null;
  const drawn = showFor(mine,
    h("div", { class: "title-row" },
      h("div", {}, h("h1", {}, j.name, " ", stateBadges(j)),
        h("p", { class: "muted", id: "words" }, j.schedule_text), hold,
        j.disabled_reason ? h("p", { class: "form-error" }, `Disabled by ticklock: ${j.disabled_reason}`) : null),
      buttons),
    h("div", { class: "grid" },
      h("section", { class: "panel" }, h("h2", {}, "Definition"), h("dl", { class: "facts" },
        h("dt", {}, "Handler"), h("dd", {}, h("code", {}, j.handler)),
        h("dt", {}, "Schedule"), h("dd", {}, h("code", {}, scheduleWritten(j.schedule))),
        h("dt", {}, "Timezone"), h("dd", {}, j.schedule.timezone || "UTC"),
        h("dt", {}, "Next fire"), h("dd", { id: "next-fire" }, nextFire ? nextFireText(nextFire) : "—"),
        h("dt", {}, "Timeout"), h("dd", {}, `${j.timeout} s, ${j.max_retries} retries`),
        h("dt", {}, "Overlap"), h("dd", {}, j.policy.overlap || "skip"),
        h("dt", {}, "Last run"), h("dd", {}, j.last_run ? [badge(j.last_run.status), " ", timeEl(j.last_run.at),
          ` — ${j.last_run.ok} of ${j.last_run.runs} succeeded`] : "never"),
        h("dt", {}, "Payload"), h("dd", {}, h("code", {}, JSON.stringify(j.payload))))),
      h("section", { class: "panel" }, h("h2", {}, upcoming.fires.length ? `The next ${plural(upcoming.fires.length, "fire", "fires")}` : "No fire to come"),
        h("div", { class: "table-wrap" }, h("table", { id: "upcoming" },
          h("thead", {}, h("tr", {}, h("th", {}, "UTC"), zoned ? h("th", {}, upcoming.timezone) : null, h("th", {}, "Status"), h("th", {}, ""))),
          h("tbody", {}, upcoming.fires.map((f) => h("tr", { dataset: { status: f.status } }, h("td", { class: "mono" }, when(f.at)),
            zoned ? h("td", { class: "mono" }, f.local.replace("T", " ")) : null,
            h("td", {}, f.status === "due" ? "runs" : badge(f.status), f.trigger !== "schedule" ? ` (${f.trigger})` : ""),
            h("td", {}, f.change ? h("span", { class: "change", title: changeText(f.change) }, f.change.kind === "gap" ? "⤼ clock change" : `↺ ${f.change.pass} pass`) : "")))))))),
    h("section", { class: "panel" }, h("h2", {}, `The last ${plural(past.length, "fire", "fires")}`), strip,
      legend(["success", "failed", "timeout", "lost", "cancelled", "skipped", "missed", "paused"])),
    h("div", { class: "grid" },
      h("section", { class: "panel" }, h("h2", {}, "Lag (s)"), lineChart(runs.items, "lag", "lag-chart")),
      h("section", { class: "panel" }, h("h2", {}, "Duration (s)"), lineChart(runs.items, "duration", "duration-chart"))),
    h("section", { class: "panel" }, h("h2", {}, "Executions"),
      runs.items.length ? h("div", { class: "table-wrap" }, h("table", { id: "executions" },
        h("thead", {}, h("tr", {}, h("th", {}, "Fire"), h("th", {}, "Status"), h("th", { class: "hide-sm" }, "Trigger"),
          h("th", { class: "num" }, "Attempts"), h("th", { class: "num" }, "Duration"), h("th", { class: "num hide-sm" }, "Lag"), h("th", {}, "Error"))),
        h("tbody", {}, runs.items.slice(0, 50).map((e) => h("tr", { dataset: { execution: e.id } },
          h("td", { class: "mono" }, when(e.scheduled_at)), h("td", {}, badge(e.status)), h("td", { class: "hide-sm" }, e.trigger),
          h("td", { class: "num" }, e.attempts), h("td", { class: "num" }, seconds(e.duration)),
          h("td", { class: "num hide-sm" }, seconds(e.lag)), h("td", {}, e.error ? h("pre", { class: "error-text" }, e.error) : ""))))))
        : h("p", { class: "muted", id: "no-runs" }, "No run yet.")));
  if (drawn) again(mine, soon.id === j.id && Date.now() < soon.until ? 1000 : 5000, () => job(id));
}

function changeText(change) {
  if (change.kind === "gap") return `a clock change skips this wall time; scheduled for ${change.scheduled || "it"}, it runs at the next instant`;
  return `a clock change repeats this wall time: this is its ${change.pass} pass`;
}

function lineChart(items, key, id) {
  const points = items.filter((e) => e[key] !== null && e[key] !== undefined).reverse();
  const width = 480, height = 160, pad = 36;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, id, role: "img",
    "aria-label": `${key} of the last ${points.length} runs` });
  if (!points.length) {
    svg.append(s("text", { x: 10, y: 20 }, "no runs yet"));
    return svg;
  }
  const top = Math.max(0.001, ...points.map((p) => p[key]));
  const x = (i) => pad + (i * (width - pad - 8)) / Math.max(1, points.length - 1);
  const y = (v) => height - 20 - ((height - 36) * v) / top;
  svg.append(s("line", { class: "axis", x1: pad, y1: height - 20, x2: width, y2: height - 20 }),
    s("text", { x: 0, y: 14 }, top.toFixed(top < 1 ? 3 : 1)), s("text", { x: 0, y: height - 22 }, "0"),
    s("polyline", { class: "line", points: points.map((p, i) => `${x(i).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" ") }));
  points.forEach((p, i) => svg.append(s("circle", { cx: x(i), cy: y(p[key]), r: 2.5, fill: `var(--${p.status})` },
    s("title", {}, `${when(p.scheduled_at)}: ${p[key].toFixed(3)} s (${p.status})`))));
  return svg;
}

async function backfill(j) {
  const hourAgo = isoZ(new Date(Date.now() - 3600 * 1000));
  const v = await ask(`Backfill ${j.name}`, "Runs the fires of a past window of its schedule again, each once. Shows a dry run first.",
    [{ name: "from", label: "From (RFC 3339)", value: hourAgo, required: true },
      { name: "to", label: "To (RFC 3339)", value: isoZ(new Date()), required: true }], "Preview");
  if (!v) return;
  const body = { from: v.from, to: v.to, dry_run: true };
  try {
    const plan = await api("POST", `/jobs/${encodeURIComponent(j.id)}/backfill`, body);
    const listed = plan.fires.slice(0, 8).map((f) => when(f.at) + (f.backfilled ? " (already backfilled)" : "")).join("; ");
    const more = plan.fires.length > 8 ? ` and ${plan.fires.length - 8} more` : "";
    const ok = await ask(`Backfill ${plan.count} fires of ${j.name}?`, `${listed}${more}.`, [], `Run ${plan.count} fires`);
    if (!ok) return;
    const done = await api("POST", `/jobs/${encodeURIComponent(j.id)}/backfill`, { ...body, dry_run: false });
    toast(`Backfill queued: ${done.count} fires`);
    route();
  } catch (err) {
    if (err.status !== 401) toast(err.message, true);
  }
}

// -- create and edit ------------------------------------------------------------------------------------------------
async function edit(id) {
  const mine = generation;
  const [handlers, current] = await Promise.all([api("GET", "/handlers"),
    id ? api("GET", `/jobs/${encodeURIComponent(id)}`) : Promise.resolve(null)]);
  const sched = current ? current.schedule : { kind: "cron", expr: "0 */5 * * * *", timezone: "UTC" };
  const field = (name, label, input, hint) => h("div", { class: "field", dataset: { field: name } },
    h("label", { for: `f-${name}` }, label), input, hint ? h("div", { class: "hint" }, hint) : null,
    h("div", { class: "error", id: `err-${name}`, role: "alert" }));
  const text = (name, value, attrs = {}) => h("input", { type: "text", id: `f-${name}`, name, value: value ?? "",
    "aria-describedby": `err-${name}`, ...attrs });
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  const inputs = {
    name: text("name", current ? current.name : "", { required: true, autocomplete: "off" }),
    handler: h("select", { id: "f-handler", name: "handler", "aria-describedby": "err-handler", required: true },
      current ? null : h("option", { value: "", selected: true, disabled: true }, "Choose a handler"),
      handlers.map((x) => h("option", { value: x.name, selected: current && current.handler === x.name }, x.name))),
    expr: text("schedule.expr", sched.expr || "0 */5 * * * *", { class: "mono", spellcheck: "false" }),
    timezone: text("schedule.timezone", sched.timezone || "UTC", { list: "zones" }),
    seconds: h("input", { type: "number", id: "f-schedule.seconds", min: 1, value: sched.seconds || 60 }),
    at: text("schedule.at", sched.at || isoZ(new Date(Date.now() + 3600 * 1000))),
    payload: h("textarea", { id: "f-payload", name: "payload", spellcheck: "false" }, JSON.stringify(current ? current.payload : {}, null, 2)),
    timeout: h("input", { type: "number", id: "f-timeout", step: "any", value: current ? current.timeout : 60 }),
    max_retries: h("input", { type: "number", id: "f-max_retries", min: 0, value: current ? current.max_retries : 0 }),
    enabled: h("input", { type: "checkbox", id: "f-enabled", checked: current ? current.enabled : true }),
  };
  let kind = sched.kind;
  const kindRadio = (k, label) => h("label", {}, h("input", { type: "radio", name: "kind", value: k, checked: kind === k,
    onchange: () => { kind = k; layout(); schedulePreview(); } }), " ", label);
  const cronFields = h("div", {}, field("schedule.expr", "Cron expression", inputs.expr,
    "Six fields, seconds first: second minute hour day-of-month month day-of-week; or @hourly, @daily…"),
  field("schedule.timezone", "Timezone", inputs.timezone), h("datalist", { id: "zones" }, zones.map((z) => h("option", { value: z }))));
  const intervalFields = field("schedule.seconds", "Every (seconds)", inputs.seconds, "Measured from the end of the previous run.");
  const onceFields = field("schedule.at", "At (RFC 3339)", inputs.at, "With an offset, Z for UTC.");
  const layout = () => {
    cronFields.hidden = kind !== "cron";
    intervalFields.hidden = kind !== "interval";
    onceFields.hidden = kind !== "once";
  };
  const preview = h("div", { class: "preview", id: "preview", "aria-live": "polite" }, "…");
  const formError = h("div", { class: "form-error", id: "form-error", role: "alert" });
  // a cron job's clock-change choices (gap, overlap) are kept as they are: the form does not show them
  const kept = current && current.schedule.kind === "cron" ? { gap: current.schedule.gap, overlap: current.schedule.overlap } : {};
  const schedule = () => (kind === "cron" ? { kind, expr: inputs.expr.value, timezone: inputs.timezone.value.trim() || "UTC", ...kept }
    : kind === "interval" ? { kind, seconds: Number(inputs.seconds.value) } : { kind, at: inputs.at.value.trim() });
  const clearErrors = (prefix) => {
    for (const el of form.querySelectorAll(".field")) {
      if (prefix && !el.dataset.field.startsWith(prefix)) continue;
      el.classList.remove("invalid");
      el.querySelector(".error").textContent = "";
    }
  };
  const showErrors = (err, prefix = "") => {
    let placed = false;
    for (const d of err.details.length ? err.details : [{ field: "", message: err.message }]) {
      // the API names fields as the body's path: body.schedule.cron.expr, schedule.expr, name
      const name = prefix + d.field.replace(/^body\./, "").replace(/\.(cron|interval|once)(?=\.|$)/, "");
      const slot = form.querySelector(`.field[data-field="${CSS.escape(name)}"]`)
        || form.querySelector(`.field[data-field="${CSS.escape(name.split(".").slice(0, 2).join("."))}"]`);
      if (slot && !slot.hidden) {
        slot.classList.add("invalid");
        slot.querySelector(".error").textContent = d.message;
        placed = true;
      }
    }
    if (!placed) formError.textContent = err.message;
  };
  let previewing = 0;
  const schedulePreview = () => {
    clearTimeout(previewing);
    previewing = setTimeout(async () => {
      try {
        const p = await api("POST", "/schedules/preview", { schedule: schedule(), count: 5 });
        clearErrors("schedule");
        preview.replaceChildren(h("strong", { id: "preview-words" }, p.description),
          h("ol", {}, p.fires.map((f) => h("li", { class: "mono" }, when(f.at),
            f.local && p.timezone !== "UTC" ? ` — ${f.local.replace("T", " ")}` : "",
            f.change ? h("span", { class: "change" }, ` ${f.change.kind === "gap" ? "clock change" : f.change.pass + " pass"}`) : ""))));
      } catch (err) {
        if (err.status === 401) return;
        clearErrors("schedule");
        preview.replaceChildren(h("span", { class: "muted" }, "No preview: the schedule is not valid yet."));
        showErrors(new ApiError(err.status, { message: err.message,
          details: err.details.map((d) => ({ ...d, field: d.field.replace(/^(body\.)?/, "") })) }));
      }
    }, 250);
  };
  for (const el of [inputs.expr, inputs.timezone, inputs.seconds, inputs.at]) el.addEventListener("input", schedulePreview);
  const form = h("form", { class: "panel form", id: "job-form", novalidate: true, onsubmit: async (event) => {
    event.preventDefault();
    clearErrors();
    formError.textContent = "";
    let payload;
    try {
      payload = JSON.parse(inputs.payload.value || "{}");
    } catch (err) {
      showErrors(new ApiError(422, { details: [{ field: "payload", message: `not JSON: ${err.message}` }] }));
      return;
    }
    const body = { name: inputs.name.value.trim(), handler: inputs.handler.value, schedule: schedule(), payload,
      timeout: Number(inputs.timeout.value), max_retries: Number(inputs.max_retries.value), enabled: inputs.enabled.checked };
    try {
      const saved = current ? await api("PATCH", `/jobs/${encodeURIComponent(current.id)}`, changed(current, body))
        : await api("POST", "/jobs", body);
      toast(current ? "Saved" : `Created ${saved.name}`);
      location.hash = `#/jobs/${saved.id}`;
    } catch (err) {
      if (err.status !== 401) showErrors(err);
    }
  } },
  h("h1", {}, current ? `Edit ${current.name}` : "New job"),
  field("name", "Name", inputs.name),
  field("handler", "Handler", inputs.handler),
  h("fieldset", { class: "kinds" }, h("legend", { class: "sr" }, "Schedule"), kindRadio("cron", "Cron"),
    kindRadio("interval", "Interval"), kindRadio("once", "Once")),
  cronFields, intervalFields, onceFields, preview,
  field("payload", "Payload (JSON)", inputs.payload),
  h("div", { class: "grid" }, field("timeout", "Timeout (s)", inputs.timeout), field("max_retries", "Retries", inputs.max_retries)),
  h("label", {}, inputs.enabled, " Enabled"),
  formError,
  h("div", { class: "actions" }, h("button", { class: "primary", type: "submit", id: "save" }, current ? "Save" : "Create"),
    h("a", { class: "button", href: current ? `#/jobs/${current.id}` : "#/jobs" }, "Cancel")));
  if (!showFor(mine, form)) return;
  layout();
  schedulePreview();
  inputs.name.focus();
}

function changed(current, body) {
  const out = {};
  for (const [k, v] of Object.entries(body)) if (JSON.stringify(current[k]) !== JSON.stringify(v)) out[k] = v;
  if (out.schedule && current.schedule.kind === body.schedule.kind) {
    const same = Object.entries(body.schedule).every(([k, v]) => current.schedule[k] === v);
    if (same) delete out.schedule;
  }
  return out;
}

// -- the router ------------------------------------------------------------------------------------------------
let checked = false; // whether this load has asked /health if the token is needed
let routed = null; // the address last drawn: a history step to the same one draws nothing
async function route() {
  stopRefresh();
  generation += 1;
  names.clear();
  routed = location.hash;
  if (loggingIn) return;
  if (!checked) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const mine = generation;
    const ok = await accepted(token);
    if (mine !== generation) return;
    checked = true;
    if (!ok) return login(token ? "That token was refused." : null);
    signedIn = Boolean(token);
  }
  const [path, search] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(search || "");
  const parts = path.split("/").filter(Boolean);
  const page = parts[0] === "jobs" ? "jobs" : parts[0] === "new" ? "new" : "overview";
  for (const link of document.querySelectorAll("nav a")) {
    link.toggleAttribute("aria-current", link.dataset.nav === page && parts.length <= 1);
    if (link.dataset.nav === page && parts.length <= 1) link.setAttribute("aria-current", "page");
  }
  document.getElementById("logout").hidden = !signedIn;
  try {
    if (parts[0] === "jobs" && parts[1] && parts[2] === "edit") await edit(decodeURIComponent(parts[1]));
    else if (parts[0] === "jobs" && parts[1]) await job(decodeURIComponent(parts[1]));
    else if (parts[0] === "jobs") await jobs(params);
    else if (parts[0] === "new") await edit(null);
    else await overview();
    document.title = `ticklock — ${main().querySelector("h1")?.textContent || page}`;
    document.body.dataset.rendered = String(Math.round(performance.now())); // when the screen was drawn (bench/)
  } catch (err) {
    if (err.status !== 401) failed(err);
  }
}

function navigated() {
  if (location.hash === routed) return; // a step back or forward fires popstate and hashchange alike
  route();
  main().focus({ preventScroll: true });
}
window.addEventListener("hashchange", navigated);
window.addEventListener("popstate", navigated);
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    login(null);
  });
  route();
});
