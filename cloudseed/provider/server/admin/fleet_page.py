"""The fleet pages on the admin listener: every instance's provisioning state, and one boot's timeline.

``/fleet`` lists the instances with their state (filter by state and by text in the id, name or
hostname); ``/fleet/instances/ID`` shows one: its state and the time of each, datasource, boot
duration, errors and warnings, and the boot's stages and modules as bars on a time axis
(``timeline_svg.py``). Both are HTML rendered here; ``/fleet/static/fleet.js`` (plain, no build
step) keeps them live: the list re-reads its rows every two seconds, an instance page follows
the provisioning stream (``admin_provisioning.py``) and re-reads its live part when a report
arrives. Every string an instance provided is escaped here, and every page carries a Content
Security Policy allowing only this listener's own script and style (no inline script at all).

Authentication is the admin API's: the bearer token, or for a browser a session cookie that
``/fleet/login`` (a form asking for the token) sets: ``HttpOnly``, ``SameSite=Strict``, valid
``SESSION_SECONDS``, an HMAC of its expiry under the token (never the token itself). The cookie
opens reads only (GET, HEAD); every write still needs the bearer token.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from html import escape
from typing import Any, Optional
from urllib.parse import parse_qsl, quote

from cloudseed.provider.registry.provisioning import STATES
from cloudseed.provider.server.admin import timeline_svg
from cloudseed.provider.server.engine.http import Response

COOKIE = "cloudseed_fleet"
SESSION_SECONDS = 12 * 3600
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = [("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"),
                    ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"), ("Cache-Control", "no-store")]
STATIC = {"fleet.js": "application/javascript; charset=utf-8", "fleet.css": "text/css; charset=utf-8"}
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_STATIC_DIR = os.path.join(_PACKAGE_DIR, "data", "fleet")  # cloudseed/data/fleet


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _when(epoch: Optional[float]) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + "Z" if epoch else "-"


# -- sessions ------------------------------------------------------------------------------------
def _sign(token: str, expiry: int) -> str:
    return hmac.new(token.encode(), f"cloudseed-fleet:{expiry}".encode(), hashlib.sha256).hexdigest()


def session_value(token: str, now: Optional[float] = None) -> str:
    expiry = int((now or time.time()) + SESSION_SECONDS)
    return f"{expiry}.{_sign(token, expiry)}"


def session_ok(request: Any, token: Optional[str], now: Optional[float] = None) -> bool:
    """Whether ``request`` carries a valid, unexpired fleet session cookie (reads only)."""
    if not token or request.method not in ("GET", "HEAD"):
        return False
    for part in request.headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name != COOKIE:
            continue
        expiry, _, mac = value.partition(".")
        if not (expiry.isascii() and expiry.isdigit()) or len(expiry) > 12:
            return False
        if int(expiry) < (now or time.time()):
            return False
        return hmac.compare_digest(mac.encode(), _sign(token, int(expiry)).encode())
    return False


def _page(status: int, title: str, body: str, headers: Optional[list] = None) -> Response:
    html = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)} - cloudseed</title><link rel=\"stylesheet\" href=\"/fleet/static/fleet.css\">"
            "<script src=\"/fleet/static/fleet.js\" defer></script></head>"
            f"<body>{body}</body></html>")
    return Response(status, html, "text/html; charset=utf-8", SECURITY_HEADERS + (headers or []))


def _fragment(html: str) -> Response:
    return Response(200, html, "text/html; charset=utf-8", SECURITY_HEADERS)


def login(request: Any, token: Optional[str]) -> Response:
    """``GET``: the form; ``POST`` (form field ``token``): the session cookie and back to the fleet."""
    failed = ""
    if request.method == "POST":
        given = dict(parse_qsl(request.body.decode("utf-8", "replace"))).get("token", "")
        if token and hmac.compare_digest(given.encode(), token.encode()):
            cookie = (f"{COOKIE}={session_value(token)}; Path=/; HttpOnly; SameSite=Strict; "
                      f"Max-Age={SESSION_SECONDS}")
            return Response(303, "", "text/plain", SECURITY_HEADERS + [("Location", "/fleet"), ("Set-Cookie", cookie)])
        failed = '<p class="error">That is not the admin token.</p>'
    elif request.method not in ("GET", "HEAD"):
        return Response(405, "method not allowed\n", "text/plain", [("Allow", "GET, HEAD, POST")])
    form = ('<main class="login"><h1>cloudseed fleet</h1>' + failed +
            '<form method="post" action="/fleet/login"><label>Admin token '
            '<input type="password" name="token" autocomplete="current-password" required></label> '
            '<button type="submit">Sign in</button></form></main>')
    return _page(401 if failed else 200, "sign in", form)


def logout() -> Response:
    return Response(303, "", "text/plain", SECURITY_HEADERS + [
        ("Location", "/fleet/login"), ("Set-Cookie", f"{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")])


def static(name: str) -> Response:
    if name not in STATIC:
        return Response(404, "not found\n", "text/plain")
    with open(os.path.join(_STATIC_DIR, name), "rb") as handle:
        return Response(200, handle.read(), STATIC[name], [("Cache-Control", "max-age=300"),
                                                           ("X-Content-Type-Options", "nosniff")])


# -- the fleet -----------------------------------------------------------------------------------
def _badge(state: str) -> str:
    return f'<span class="state {_e(state)}">{_e(state)}</span>'


def fleet_rows(entries: list[dict[str, Any]]) -> str:
    rows = []
    for entry in entries:
        failure = entry.get("failure") or {}
        problem = f"{failure.get('name', '')}: {failure.get('message', '')}" if failure else (
            (entry.get("warnings") or [""])[0])
        rows.append(
            f'<tr data-instance="{_e(entry["instance_id"])}" data-state="{_e(entry["state"])}">'
            f'<td><a href="/fleet/instances/{_e(quote(entry["instance_id"], safe=""))}">{_e(entry["instance_id"])}'
            f'</a></td><td>{_e(entry.get("name"))}</td><td>{_e(entry.get("hostname"))}</td>'
            f'<td>{_badge(entry["state"])}</td><td>{_e(entry.get("datasource") or "-")}</td>'
            f'<td>{_e(_when(entry["times"].get(entry["state"])))}</td>'
            f'<td>{_e(entry["boot_seconds"]) if entry.get("boot_seconds") is not None else "-"}</td>'
            f'<td class="problem">{_e(problem)}</td></tr>')
    return "".join(rows) or '<tr><td colspan="8" class="empty">no instances match</td></tr>'


def fleet(entries: list[dict[str, Any]], options: dict[str, Any], query: str) -> Response:
    chosen = options.get("state") or ""
    choices = "".join(f'<option value="{s}"{" selected" if s == chosen else ""}>{s}</option>' for s in STATES)
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry["state"]] = counts.get(entry["state"], 0) + 1
    summary = ", ".join(f"{counts[s]} {s}" for s in STATES if s in counts) or "none"
    body = (
        '<header><h1>Fleet</h1><form method="post" action="/fleet/logout"><button>Sign out</button></form></header>'
        '<form class="filter" method="get" action="/fleet"><label>State <select name="state">'
        f'<option value="">any</option>{choices}</select></label> <label>Contains <input name="q" '
        f'value="{_e(options.get("contains", ""))}"></label> <button type="submit">Filter</button></form>'
        f'<p class="summary" id="summary">{_e(len(entries))} instances: {_e(summary)}</p>'
        '<table id="fleet"><thead><tr><th>instance</th><th>name</th><th>hostname</th><th>state</th>'
        '<th>datasource</th><th>since</th><th>boot s</th><th>problem</th></tr></thead>'
        f'<tbody id="fleet-rows" data-refresh="/fleet?part=rows&amp;{_e(query)}">{fleet_rows(entries)}</tbody></table>')
    return _page(200, "fleet", body)


# -- one instance --------------------------------------------------------------------------------
def instance_live(state: dict[str, Any], reports: list[dict[str, Any]]) -> str:
    """The part of an instance page that changes while it boots."""
    times = "".join(f"<li>{_e(name)}: {_e(_when(state['times'].get(name)))}</li>"
                    for name in STATES if state["times"].get(name))
    failure = state.get("failure")
    failed = (f'<p class="failure" id="failure"><b>{_e(failure["name"])}</b>: {_e(failure["message"])}</p>'
              if failure else "")
    errors = "".join(f"<li>{_e(e)}</li>" for e in state.get("errors", []))
    warnings = "".join(f"<li>{_e(w)}</li>" for w in state.get("warnings", []))
    seconds = f"{state['boot_seconds']:.3f} s" if state.get("boot_seconds") is not None else "-"
    bars = timeline_svg.bars_from_reports(reports)
    last = reports[-1]["seq"] if reports else 0
    return (
        f'<div id="facts" data-state="{_e(state["state"])}" data-last="{last}">'
        f'<p>State {_badge(state["state"])} &middot; datasource <b id="datasource">{_e(state.get("datasource") or "-")}'
        f'</b> &middot; boot {_e(state.get("boot", 0))} took <b id="boot-seconds">{_e(seconds)}</b></p>'
        f'<ul class="times">{times}</ul>{failed}</div>'
        f'<h2>Timeline</h2><div id="timeline">{timeline_svg.render(bars)}</div>'
        f'<h2>Errors</h2><ul id="errors" class="errors">{errors or "<li>none</li>"}</ul>'
        f'<h2>Warnings</h2><ul id="warnings" class="warnings">{warnings or "<li>none</li>"}</ul>')


def instance(instance_id: str, state: dict[str, Any], reports: list[dict[str, Any]]) -> Response:
    quoted = _e(quote(instance_id, safe=""))
    last = reports[-1]["seq"] if reports else 0
    body = (f'<header><a href="/fleet">&larr; fleet</a><h1>{_e(instance_id)}</h1></header>'
            f'<main id="instance" data-stream="/v1/instances/{quoted}/provisioning/stream?after={last}" '
            f'data-refresh="/fleet/instances/{quoted}?part=live">'
            f'<div id="live">{instance_live(state, reports)}</div></main>')
    return _page(200, instance_id, body)


def fragment(html: str) -> Response:
    return _fragment(html)
