// The once demo page: buttons POST an action; the state arrives by server-sent events.
"use strict";
const $ = (id) => document.getElementById(id);
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const money = (n) => (n < 0 ? "-$" : "$") + Math.abs(n).toLocaleString("en-US");

function set(id, value, text) {
  const el = $(id);
  el.dataset.value = String(value);
  el.textContent = text === undefined ? String(value) : text;
}

function list(id, items, render, empty) {
  const el = $(id);
  el.replaceChildren();
  if (items.length === 0 && empty) {
    const li = document.createElement("li");
    li.className = "none";
    li.textContent = empty;
    el.append(li);
  }
  for (const item of items) {
    const li = document.createElement("li");
    li.textContent = render(item);
    el.append(li);
  }
}

function render(s) {
  set("charged", s.charged, money(s.charged));
  set("delivered", s.delivered);
  set("duplicated", s.duplicated);
  const badge = $("settled");
  badge.dataset.value = String(s.settled);
  badge.textContent = s.settled ? "settled" : "working…";
  badge.classList.toggle("busy", !s.settled);

  set("naive-ledger", s.naive.ledger, money(s.naive.ledger));
  set("naive-overcount", s.naive.overcount, money(s.naive.overcount));
  set("naive-charges", s.naive.providerCharges);
  $("naive-meta").textContent = `${plural(s.naive.deliveries, "delivery").replace("deliverys", "deliveries")} · `
    + `${plural(s.naive.crashes, "crash").replace("crashs", "crashes")} · ${plural(s.naive.refusedCommits, "refused offset commit")}`
    + ` · card charged ${s.naive.providerCharges}× for ${plural(s.payments, "payment")}`;
  list("naive-log", s.naive.log, (l) => l);

  set("once-ledger", s.once.ledger, money(s.once.ledger));
  set("once-overcount", s.once.overcount, money(s.once.overcount));
  set("once-deduped", s.once.deduped, money(s.once.deduped));
  set("once-charges", s.once.providerCharges);
  $("once-meta").textContent = `${plural(s.once.deliveries, "delivery").replace("deliverys", "deliveries")} · `
    + `${s.once.dedupedCount} discarded · card charged ${s.once.providerCharges}× for ${plural(s.payments, "payment")}`
    + (s.once.providerReplays ? ` · ${s.once.providerReplays} re-sent charge${s.once.providerReplays === 1 ? "" : "s"} replayed by the provider` : "");
  list("once-discarded", s.once.discarded, (d) => `${d.payment} · ${d.reason}`, "no duplicates yet");
  list("once-log", s.once.log, (l) => l);

  if (s.story.length > 0) {
    $("story-now").textContent = s.story[0];
    list("story-before", s.story.slice(1, 4), (l) => l);
  }
}

for (const button of document.querySelectorAll("button[data-action]")) {
  button.addEventListener("click", async () => {
    const r = await fetch(`/api/actions/${button.dataset.action}`, { method: "POST" });
    const body = await r.json();
    $("story-now").textContent = body.explanation || body.error;
  });
}

const events = new EventSource("/events");
events.addEventListener("state", (e) => render(JSON.parse(e.data)));
fetch("/api/state").then((r) => r.json()).then(render);
