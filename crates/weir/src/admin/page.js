// The status page's script (served as /admin/page.js, so that the page's policy can
// forbid inline scripts): asks the admin API with the token from the address's
// `#token=` fragment or the form, and renders with textContent only (identities come
// from callers and are never read as HTML).
"use strict";
const REFRESH_MS = 2000;
let token = sessionStorage.getItem("weir-admin-token") || "";
const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromHash) {
  token = fromHash;
  sessionStorage.setItem("weir-admin-token", token);
  history.replaceState(null, "", location.pathname);
}
const status = document.getElementById("status");
const login = document.getElementById("login");
login.addEventListener("submit", (event) => {
  event.preventDefault();
  token = document.getElementById("token").value.trim();
  sessionStorage.setItem("weir-admin-token", token);
  refresh();
});

async function api(path, options = {}) {
  const response = await fetch("/admin/api/" + path, {
    ...options,
    headers: { "Authorization": "Bearer " + token, ...(options.headers || {}) },
  });
  if (response.status === 401) {
    throw Object.assign(new Error("the admin token was not accepted"), { auth: true });
  }
  if (!response.ok) {
    throw new Error(path + ": HTTP " + response.status);
  }
  return response.json();
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function rate(value) {
  return value >= 100 ? value.toFixed(0) : value.toFixed(2);
}

function period(seconds) {
  if (seconds % 3600 === 0) return seconds / 3600 + " h";
  if (seconds % 60 === 0) return seconds / 60 + " min";
  return seconds + " s";
}

async function reset(rule, key) {
  if (!confirm("Forget the state and lockouts of " + key + " under " + rule + "?")) return;
  await api("reset", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ rule, key }),
  });
  refresh();
}

async function lift(rule, key) {
  if (!confirm("Lift the ban of " + key + " under " + rule + "?")) return;
  await api("bans/" + encodeURIComponent(rule) + "/" + encodeURIComponent(key), { method: "DELETE" });
  refresh();
}

function renderBans(answer) {
  const body = document.querySelector("#bans tbody");
  body.replaceChildren();
  for (const b of answer.bans) {
    const row = body.insertRow();
    row.dataset.rule = b.rule;
    cell(row, b.rule);
    cell(row, "").appendChild(document.createElement("code")).textContent = b.key;
    cell(row, Math.ceil(b.ends_in_ms / 1000) + " s", "n deny");
    const button = document.createElement("button");
    button.textContent = "lift";
    button.addEventListener("click", () => lift(b.rule, b.key));
    cell(row, "").appendChild(button);
  }
  if (answer.bans.length === 0) {
    const row = body.insertRow();
    cell(row, "No ban in force.", "muted").colSpan = 4;
  }
  if (answer.truncated) {
    const row = body.insertRow();
    const shown = answer.bans.length + " of " + answer.total + " bans shown (those ending last).";
    cell(row, shown, "muted").colSpan = 4;
  }
}

// Each door's answers at the last refresh, for its rate over the time since.
let lastDoors = null;

function renderDoors(doors) {
  const now = performance.now();
  const body = document.querySelector("#doors tbody");
  body.replaceChildren();
  for (const d of doors.filter((d) => d.total > 0)) {
    const before = lastDoors && lastDoors.totals.get(d.door);
    const seconds = lastDoors ? (now - lastDoors.at) / 1000 : 0;
    const row = body.insertRow();
    row.dataset.door = d.door;
    cell(row, d.door);
    cell(row, before !== undefined && seconds > 0 ? rate((d.total - before) / seconds) : "…", "n");
    cell(row, d.answers["2xx"], "n");
    cell(row, d.answers["4xx"], d.answers["4xx"] > 0 ? "n deny" : "n");
    cell(row, d.answers["5xx"], d.answers["5xx"] > 0 ? "n deny" : "n");
    cell(row, d.total, "n");
  }
  lastDoors = { at: now, totals: new Map(doors.map((d) => [d.door, d.total])) };
}

// The overrides set at runtime (GET /admin/api/overrides); text only, never HTML.
function renderOverrides(overrides) {
  const body = document.querySelector("#overrides tbody");
  body.replaceChildren();
  for (const o of overrides) {
    const row = body.insertRow();
    row.dataset.rule = o.rule;
    cell(row, o.rule);
    cell(row, "").appendChild(document.createElement("code")).textContent = o.key;
    cell(row, o.limit, "n");
    cell(row, o.period_seconds === null ? "the rule's" : period(o.period_seconds), "n");
    cell(row, o.expires_at === null ? "never" : o.expires_at);
    cell(row, o.reason);
    cell(row, o.set_at, "muted");
  }
  if (overrides.length === 0) {
    const row = body.insertRow();
    cell(row, "none", "muted").colSpan = 7;
  }
}

// The list entries set at runtime (GET /admin/api/lists); text only, never HTML.
function renderLists(entries) {
  const body = document.querySelector("#lists tbody");
  body.replaceChildren();
  for (const e of entries) {
    const row = body.insertRow();
    row.dataset.list = e.list;
    cell(row, e.list, e.list === "deny" ? "deny" : undefined);
    cell(row, e.kind);
    cell(row, "").appendChild(document.createElement("code")).textContent = e.entry;
    cell(row, e.expires_at === null ? "never" : e.expires_at);
    cell(row, e.reason);
    cell(row, e.set_at, "muted");
  }
  if (entries.length === 0) {
    const row = body.insertRow();
    cell(row, "none", "muted").colSpan = 6;
  }
}

async function refresh() {
  try {
    renderDoors(await api("doors"));
    renderOverrides(await api("overrides"));
    renderLists(await api("lists"));
    renderBans(await api("bans"));
    const rules = await api("rules");
    const body = document.querySelector("#rules tbody");
    body.replaceChildren();
    for (const r of rules) {
      const row = body.insertRow();
      row.dataset.rule = r.name;
      cell(row, r.name);
      cell(row, r.algorithm);
      cell(row, r.limit, "n");
      cell(row, period(r.period_seconds), "n");
      cell(row, rate(r.allowed_per_second), "n");
      cell(row, rate(r.denied_per_second), r.denied_per_second > 0 ? "n deny" : "n");
      cell(row, r.near_limit_keys, "n");
      cell(row, r.allowed_total, "n");
      cell(row, r.denied_total, r.denied_total > 0 ? "n deny" : "n");
    }
    const tops = await Promise.all(
      rules.map((r) => api("top?rule=" + encodeURIComponent(r.name) + "&minutes=5&n=10")));
    const top = document.getElementById("top");
    top.replaceChildren();
    for (const t of tops.filter((t) => t.top.length > 0)) {
      const table = document.createElement("table");
      table.dataset.rule = t.rule;
      table.createCaption().textContent = t.rule;
      const head = table.createTHead().insertRow();
      for (const name of ["identity", "denied", ""]) cell(head, name, name === "denied" ? "n" : "");
      const tbody = table.createTBody();
      for (const c of t.top) {
        const row = tbody.insertRow();
        cell(row, "").appendChild(document.createElement("code")).textContent = c.identity;
        cell(row, c.error > 0 ? "≤ " + c.denied : c.denied, "n deny");
        const button = document.createElement("button");
        button.textContent = "reset";
        button.addEventListener("click", () => reset(t.rule, c.identity));
        cell(row, "").appendChild(button);
      }
      top.appendChild(table);
    }
    if (tops.every((t) => t.top.length === 0)) {
      top.textContent = "No request denied in the last 5 minutes.";
    }
    login.hidden = true;
    status.className = "muted";
    status.textContent = "updated " + new Date().toLocaleTimeString() + " · refreshes every " + REFRESH_MS / 1000 + " s";
  } catch (error) {
    status.className = "error";
    status.textContent = error.message;
    if (error.auth) login.hidden = false;
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
