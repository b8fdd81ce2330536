// cloudseed fleet pages: keep the server-rendered parts live (no build step, no inline script).
// The fleet list re-reads its rows every two seconds; an instance page follows the provisioning
// stream (Server-Sent Events) and re-reads its live part when a report or a state arrives. The
// HTML fetched is rendered and escaped by the server, from this same origin (see the page's CSP).
"use strict";

function refresh(element, url) {
  return fetch(url, {credentials: "same-origin", cache: "no-store"})
    .then(function (answer) { return answer.ok ? answer.text() : null; })
    .then(function (html) { if (html !== null) { element.innerHTML = html; } })
    .catch(function () { /* the next tick tries again */ });
}

function followFleet(rows) {
  var url = rows.getAttribute("data-refresh");
  setInterval(function () { refresh(rows, url); }, 2000);
}

function followInstance(main) {
  var live = document.getElementById("live");
  var url = main.getAttribute("data-refresh");
  var pending = false;
  function update() {
    if (pending) { return; }
    pending = true;
    refresh(live, url).then(function () { pending = false; });
  }
  if (window.EventSource) {
    var source = new EventSource(main.getAttribute("data-stream"));
    source.addEventListener("report", update);
    source.addEventListener("state", function (event) {
      var facts = document.getElementById("facts");
      var state = JSON.parse(event.data).state;
      if (!facts || facts.getAttribute("data-state") !== state) { update(); }
    });
  } else {
    setInterval(update, 2000);
  }
}

document.addEventListener("DOMContentLoaded", function () {
  var rows = document.getElementById("fleet-rows");
  if (rows) { followFleet(rows); }
  var main = document.getElementById("instance");
  if (main) { followInstance(main); }
});
