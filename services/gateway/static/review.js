// The coachbus review console: plain ES module, no framework, no build step.
//
// Rule for everything below, as in the web chat: what a person wrote, what coachbus
// or a reviewer answered, ids and notes only ever reach the page through
// textContent (via el()), never through an HTML parser. The CSP backs this up.

import { readEvents } from "./sse.js";

const KEY_STORE = "coachbus.review.key";
const RANK = { critical: 3, high: 2, moderate: 1, low: 0 };
const RECONNECT_MS = 2000;

const $ = (id) => document.getElementById(id);

const state = {
  key: sessionStorage.getItem(KEY_STORE) || "",
  you: "",
  items: new Map(), // item id -> summary
  selected: null, // item id
  detail: null, // the selected item's view
  skew: 0, // server clock minus ours, ms
  stream: null, // AbortController of the live queue
};

// ------------------------------------------------------------------ helpers

/** Create an element; `text` is set with textContent, never parsed as HTML. */
function el(tag, { cls, text, attrs } = {}, ...children) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) if (child) node.append(child);
  return node;
}

const now = () => Date.now() + state.skew;

function ago(iso) {
  const s = Math.max(0, Math.floor((now() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, "0")} s`;
  const h = Math.floor(m / 60);
  return `${h} h ${String(m % 60).padStart(2, "0")} min`;
}

const clock = (iso) => (iso ? new Date(iso).toLocaleTimeString() : "");

let statusTimer = null;
function showStatus(message, kind = "info") {
  const box = $("status");
  box.textContent = message;
  box.dataset.kind = kind;
  box.hidden = false;
  clearTimeout(statusTimer);
  if (kind !== "error") statusTimer = setTimeout(() => (box.hidden = true), 6000);
}

class ApiError extends Error {
  constructor(status, titleText, detail) {
    super(detail || titleText);
    this.status = status;
  }
}

async function api(path, { method = "GET", body, signal } = {}) {
  const headers = { Authorization: `Bearer ${state.key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    cache: "no-store",
  });
  if (!response.ok) {
    let problem = {};
    try {
      problem = await response.json();
    } catch {
      // not JSON (a proxy's error page): the status line will do
    }
    throw new ApiError(response.status, problem.title || response.statusText, problem.detail);
  }
  return response;
}

/** The claim as it stands now: a lapsed one is nobody's. */
function holder(summary) {
  const claim = summary && summary.claim;
  if (!claim || Date.parse(claim.expires_at) < now()) return null;
  return claim;
}

// ------------------------------------------------------------------ key

async function connect(key) {
  state.key = key;
  try {
    const listing = await (await api("/v1/review")).json();
    sessionStorage.setItem(KEY_STORE, key);
    state.you = listing.you;
    $("reviewer-id").textContent = listing.you;
    $("identity").hidden = false;
    $("key-form").hidden = true;
    applySnapshot(listing);
    follow();
    return true;
  } catch (err) {
    const message =
      err.status === 401
        ? "That key was not accepted."
        : err.status === 403
          ? "That key has no reviewer role."
          : err.message;
    showStatus(message, "error");
    signOut();
    return false;
  }
}

function signOut() {
  state.key = "";
  sessionStorage.removeItem(KEY_STORE);
  state.stream?.abort();
  state.stream = null;
  $("identity").hidden = true;
  $("key-form").hidden = false;
  $("key-input").focus();
}

// ------------------------------------------------------------------ the live queue

function applySnapshot(data) {
  state.skew = Date.parse(data.server_time) - Date.now();
  state.items = new Map(data.items.map((item) => [item.item_id, item]));
  renderQueue();
}

async function follow() {
  state.stream?.abort();
  const controller = new AbortController();
  state.stream = controller;
  const live = $("live");
  while (!controller.signal.aborted) {
    try {
      const response = await api("/v1/review/events", { signal: controller.signal });
      live.dataset.state = "on";
      await readEvents(response, (event, data) => {
        if (event === "snapshot") applySnapshot(data); // draws the queue itself
        else if (event === "item") state.items.set(data.item_id, data);
        else if (event === "gone") state.items.delete(data.item_id);
        else return;
        if (event !== "snapshot") renderQueue();
        if (state.selected && (event !== "item" || data.item_id === state.selected)) {
          refreshItem();
        }
      });
    } catch (err) {
      if (controller.signal.aborted) return;
      if (err.status === 401 || err.status === 403) {
        showStatus("The key is no longer accepted.", "error");
        signOut();
        return;
      }
    }
    live.dataset.state = "off";
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
  }
}

function ordered() {
  // Each item's sort key once, not once per comparison: a queue can hold thousands.
  return [...state.items.values()]
    .map((item) => [RANK[item.severity], Date.parse(item.created_at), item])
    .sort((a, b) => b[0] - a[0] || a[1] - b[1])
    .map(([, , item]) => item);
}

// The rows drawn, by item id, each with what it shows (but its age, which tick()
// counts up): an event redraws only the rows whose item changed and moves only the
// rows out of place, so one claim in a queue of thousands costs one row, not all.
const rows = new Map();

function rowView(item) {
  const claim = holder(item);
  const who = claim
    ? claim.reviewer_id === state.you
      ? "claimed by you"
      : `claimed by ${claim.reviewer_id}`
    : "waiting";
  return { claimed: claim ? claim.reviewer_id : "", who };
}

function queueRow(item, view) {
  const li = el(
    "li",
    {
      cls: "queue-item",
      attrs: {
        "data-item": item.item_id,
        "data-severity": item.severity,
        "data-claimed": view.claimed,
        tabindex: "0",
        role: "button",
      },
    },
    el(
      "div",
      { cls: "queue-top" },
      el("span", { cls: `sev sev-${item.severity}`, text: item.severity }),
      el("span", { cls: "age", text: ago(item.created_at), attrs: { "data-since": item.created_at } }),
    ),
    el("p", { cls: "excerpt", text: item.excerpt }),
    el("p", { cls: "queue-claim", text: view.who }),
  );
  li.addEventListener("click", () => select(item.item_id));
  li.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") select(item.item_id);
  });
  return li;
}

function renderQueue() {
  const list = $("queue");
  const items = ordered();
  const wanted = items.map((item) => {
    const view = rowView(item);
    const shows = JSON.stringify([item.severity, item.created_at, item.excerpt, view.claimed, view.who]);
    let row = rows.get(item.item_id);
    if (!row || row.shows !== shows) {
      const li = queueRow(item, view);
      if (row) row.li.replaceWith(li);
      row = { li, shows };
      rows.set(item.item_id, row);
    }
    row.li.classList.toggle("selected", item.item_id === state.selected);
    return row.li;
  });
  for (const [itemId, row] of rows) {
    if (!state.items.has(itemId)) {
      row.li.remove();
      rows.delete(itemId);
    }
  }
  let next = list.firstElementChild;
  for (const li of wanted) {
    if (li === next) next = next.nextElementSibling;
    else list.insertBefore(li, next);
  }
  $("queue-count").textContent = String(items.length);
  $("queue-empty").hidden = items.length > 0;
  if (state.selected && !state.items.has(state.selected)) {
    state.selected = null;
    state.detail = null;
    $("item").hidden = true;
    $("no-item").hidden = false;
  }
}

// Ages count up every second without asking the server.
function tick() {
  for (const node of document.querySelectorAll("[data-since]")) {
    node.textContent = ago(node.dataset.since);
  }
  if (state.detail) renderClaim();
}

// ------------------------------------------------------------------ one item

async function select(itemId) {
  rows.get(state.selected)?.li.classList.remove("selected");
  state.selected = itemId;
  rows.get(itemId)?.li.classList.add("selected");
  await refreshItem(true);
}

let refreshing = null;
async function refreshItem(fresh = false) {
  const itemId = state.selected;
  if (!itemId) return;
  refreshing?.abort();
  const controller = new AbortController();
  refreshing = controller;
  try {
    const detail = await (
      await api(`/v1/review/${encodeURIComponent(itemId)}`, { signal: controller.signal })
    ).json();
    if (state.selected !== itemId) return;
    renderItem(detail, fresh);
  } catch (err) {
    if (controller.signal.aborted) return;
    if (err.status === 404) {
      state.items.delete(itemId);
      renderQueue();
      return;
    }
    showStatus(err.message, "error");
  }
}

function renderClaim() {
  const item = state.items.get(state.selected) || state.detail.item;
  const claim = holder(item);
  const mine = claim && claim.reviewer_id === state.you;
  const line = $("item-claim");
  line.dataset.holder = claim ? claim.reviewer_id : "";
  if (!claim) line.textContent = "Nobody has claimed it.";
  else {
    const until = Math.max(0, Math.round((Date.parse(claim.expires_at) - now()) / 60000));
    line.textContent =
      `${mine ? "You claimed it" : `Claimed by ${claim.reviewer_id}`} at ` +
      `${clock(claim.since)} (lapses in ${until} min unless renewed).`;
  }
  $("claim").hidden = Boolean(mine);
  $("claim").disabled = Boolean(claim && !mine);
  $("renew").hidden = !mine;
  $("release").hidden = !mine;
  for (const id of ["answer-text", "answer-send", "template", "outcome", "close-note", "close-send"]) {
    $(id).disabled = !mine;
  }
}

function fact(dl, name, value) {
  if (value === null || value === undefined || value === "") return;
  dl.append(el("dt", { text: name }), el("dd", { text: value }));
}

function renderItem(detail, fresh) {
  state.detail = detail;
  $("no-item").hidden = true;
  $("item").hidden = false;
  const item = detail.item;
  const sev = $("item-severity");
  sev.textContent = item.severity;
  sev.className = `sev sev-${item.severity}`;
  const age = $("item-age");
  age.dataset.since = item.created_at;
  age.textContent = ago(item.created_at);
  renderClaim();

  const screen = detail.screen;
  const facts = $("screen");
  facts.replaceChildren();
  fact(facts, "Decision", screen.decision);
  fact(facts, "Reason", screen.reason);
  fact(facts, "Category", screen.category ? screen.category.replace(/_/g, " ") : "not reported");
  fact(facts, "Confidence", screen.confidence === null ? null : `${Math.round(screen.confidence * 100)}%`);
  fact(facts, "Read from", screen.basis ? screen.basis.replace(/_/g, " ") : null);
  fact(facts, "Plan or means named", screen.plan === null ? null : screen.plan ? "yes" : "no");
  fact(
    facts,
    "Language",
    `${detail.language}${detail.address ? ` (${detail.address === "informal" ? "du" : "Sie"})` : ""}`,
  );
  fact(facts, "Person", item.user_id);
  fact(facts, "Session", item.session_id);

  $("session").replaceChildren(
    ...detail.session.map((turn) =>
      el(
        "li",
        { cls: turn.this_item ? "turn this-item" : "turn", attrs: { "data-turn": turn.turn_id } },
        turn.said !== null ? el("p", { cls: "said", text: turn.said }) : el("p", { cls: "said muted", text: "(not held here)" }),
        turn.coach ? el("p", { cls: "reply", text: turn.coach }) : null,
        turn.final ? el("p", { cls: "reply", text: turn.final }) : null,
        ...turn.human.map((text) => el("p", { cls: "reply human", text })),
      ),
    ),
  );

  const sent = $("sent");
  sent.replaceChildren();
  for (const [kind, label] of [["coach", "First thoughts"], ["final", "Reply"]]) {
    const reply = detail.sent[kind];
    if (!reply) continue;
    sent.append(
      el(
        "div",
        { cls: "sent-reply", attrs: { "data-kind": kind } },
        el("p", { cls: "small", text: `${label} (${reply.tier})` }),
        el("p", { text: reply.text }),
        el("p", {
          cls: reply.help_lines ? "flag ok" : "flag warn",
          text: reply.help_lines ? `carried help lines: ${reply.numbers.join(", ")}` : "no help line in it",
        }),
      ),
    );
  }
  if (!sent.children.length) sent.append(el("p", { cls: "muted", text: "Nothing this gateway saw." }));

  $("help-locale").textContent = detail.locale;
  $("help-body").replaceChildren(
    ...detail.help_lines.groups.map((group) =>
      el(
        "div",
        { cls: "help-group" },
        el("p", { cls: "small", text: group.label }),
        ...group.lines.map((line) =>
          el("p", { text: `${line.name ? `${line.name}: ` : ""}${line.numbers.join(" / ")}${line.details ? ` (${line.details})` : ""}` }),
        ),
      ),
    ),
  );

  if (fresh) {
    $("template").replaceChildren(
      el("option", { text: "free text", attrs: { value: "" } }),
      ...detail.templates.map((t) => el("option", { text: t.label, attrs: { value: t.id } })),
    );
    $("outcome").replaceChildren(
      ...detail.outcomes.map((o) => el("option", { text: o.label, attrs: { value: o.id } })),
    );
    $("answer-text").value = "";
    $("close-note").value = "";
  }

  $("answers").replaceChildren(
    ...detail.answers.map((a) =>
      el(
        "li",
        { cls: "answer-sent" },
        el("p", { cls: "small", text: `${a.reviewer_id} at ${clock(a.at)}` }),
        el("p", { text: a.text }),
      ),
    ),
  );
  $("history").replaceChildren(
    ...detail.history.map((h) =>
      el("li", {
        cls: h.accepted ? "" : "refused",
        text:
          `${clock(h.at)} ${h.reviewer_id}: ${h.action}` +
          `${h.outcome ? ` (${h.outcome})` : ""}${h.template ? ` (template ${h.template})` : ""}` +
          `${h.accepted ? "" : `, refused: ${h.reason}`}`,
      }),
    ),
  );
}

// ------------------------------------------------------------------ acting

async function act(path, body, done) {
  const itemId = state.selected;
  if (!itemId) return;
  try {
    await api(`/v1/review/${encodeURIComponent(itemId)}/${path}`, { method: "POST", body });
    if (done) showStatus(done);
  } catch (err) {
    showStatus(err.message, "error");
    await refreshItem();
    return;
  }
  // A closed item leaves the queue by the live feed's "gone" event; fetching it here
  // would race that event and, once the close has landed, answer 404 (which the
  // browser logs as an error though nothing went wrong).
  if (path !== "close") await refreshItem();
}

function wire() {
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const key = $("key-input").value.trim();
    $("key-input").value = "";
    if (key) connect(key);
  });
  $("change-key").addEventListener("click", signOut);
  $("claim").addEventListener("click", () => act("claim", undefined, "Claimed."));
  $("renew").addEventListener("click", () => act("renew", undefined, "Claim renewed."));
  $("release").addEventListener("click", () => act("release", undefined, "Released."));
  $("template").addEventListener("change", () => {
    const chosen = state.detail?.templates.find((t) => t.id === $("template").value);
    if (chosen) $("answer-text").value = chosen.text;
  });
  $("answer-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = $("answer-text").value.trim();
    if (!text) return;
    const template = $("template").value || undefined;
    await act("answer", { text, template }, "Sent to the person.");
    $("answer-text").value = "";
    $("template").value = "";
  });
  $("close-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    await act("close", { outcome: $("outcome").value, note: $("close-note").value }, "Closed.");
  });
  setInterval(tick, 1000);
}

wire();
if (state.key) connect(state.key);
