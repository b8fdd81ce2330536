"""The fleet pages in a real browser over a fleet of booting guests.

Four guests, each in its own network namespace with its own root, boot through the four stages
against one ``cloudseed serve`` (NoCloud over HTTP) and report to it with the ``cloudseed``
handler. Headless Chromium (Debian's package, over the DevTools protocol) signs in with the admin
token, watches the pages while they boot, and the DOM is checked: every guest's state, the
timeline's bars, a failing ``runcmd`` shown ``failed`` with its module and message within a
second of the report, nothing an instance sent run as markup, no secret shown, no CSP violation.
Screenshots go to ``$CLOUDSEED_ARTEFACTS`` (default: the test's temporary directory).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.provider.server.browser import CHROMIUM, Browser
from tests.provider.server.server_support import ADMIN_TOKEN, ServerProcess

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package"),
    pytest.mark.skipif(not os.path.exists("/bin/busybox"), reason="needs busybox-static for the guests' scripts"),
]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PYTHON = os.path.join(REPO, ".venv", "bin", "python")
SECRET = "Fleet-Sekrit-Pw-77"
HOSTILE = '<img src=x onerror="document.title=666"><script>document.title=667</script>'
BOOT = ("import sys; from cloudseed.agent.boot.stages import Agent; from cloudseed.core.root import TargetRoot; "
        "sys.exit(Agent(TargetRoot(sys.argv[1])).run_all())")
GUESTS = {
    "ok": "#cloud-config\nwrite_files: [{path: /etc/ok.conf, content: fine}]\nruncmd: ['sleep 2', 'true']\n",
    "fails": "#cloud-config\nruncmd: ['sleep 3', 'echo broke >&2; exit 3']\n",
    "warns": "#cloud-config\napk_repos: {alpine_repo: {version: v3.19}}\nruncmd: ['true']\n",
    "hostile": f"#cloud-config\npassword: {SECRET}\nbootcmd:\n  - echo '{HOSTILE} {SECRET}' >&2; exit 2\n",
}
MODULES = """\
datasource_list: [NoCloud]
network: {{config: disabled}}
datasource: {{NoCloud: {{seedfrom: "http://{host}:{port}/nocloud/"}}}}
reporting: {{platform: {{type: cloudseed, endpoint: "http://{host}:{port}/cloudseed/v1/events"}}}}
cloud_init_modules: [bootcmd, write_files]
cloud_config_modules: [apk_configure, runcmd]
cloud_final_modules: [scripts_user, final_message]
"""


def sh(*args, check=True):
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    if check and proc.returncode:
        raise AssertionError(f"{' '.join(args)}: {proc.stderr}")
    return proc


class Guest:
    """A network namespace joined to the host by a veth pair, and a root to boot."""

    def __init__(self, name: str, index: int, top: str):
        tag = f"{os.getpid() % 10000}{index}"
        self.name, self.ns = name, f"csfl{tag}"
        self.host_if, self.guest_if = f"vfh{tag}"[:15], f"vfg{tag}"[:15]
        subnet = (os.getpid() * 4 + index) % 250 + 1
        self.host_ip, self.ip = f"10.81.{subnet}.1", f"10.81.{subnet}.2"
        self.root = os.path.join(top, name)
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.guest_if, "netns", self.ns)
        sh("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.host_if)
        sh("ip", "link", "set", self.host_if, "up")
        for cmd in (("ip", "link", "set", "lo", "up"), ("ip", "addr", "add", f"{self.ip}/24", "dev", self.guest_if),
                    ("ip", "link", "set", self.guest_if, "up")):
            sh("ip", "netns", "exec", self.ns, *cmd)
        self.proc: subprocess.Popen | None = None

    def prepare(self, port: int) -> None:
        etc = os.path.join(self.root, "etc")
        os.makedirs(os.path.join(etc, "cloudseed", "cloud.cfg.d"), exist_ok=True)
        for path, text in (("passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("group", "root:x:0:\n"),
                           ("os-release", 'ID=debian\nVERSION_ID="12"\n'),
                           ("cloudseed/cloud.cfg.d/10-fleet.cfg", MODULES.format(host=self.host_ip, port=port))):
            with open(os.path.join(etc, path), "w") as handle:
                handle.write(text)
        for folder in ("bin", "tmp", "var/tmp"):
            os.makedirs(os.path.join(self.root, folder), exist_ok=True)
        shutil.copy2("/bin/busybox", os.path.join(self.root, "bin", "busybox"))
        for applet in ("sh", "echo", "true", "false", "sleep", "cat"):
            os.symlink("busybox", os.path.join(self.root, "bin", applet))

    def boot(self) -> None:
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, PYTHON, "-c", BOOT, self.root],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            self.proc.stderr.close()
        sh("ip", "link", "del", self.host_if, check=False)
        sh("ip", "netns", "del", self.ns, check=False)


@pytest.fixture
def fleet(tmp_path):
    guests, server, browser = [], None, None
    try:
        server = ServerProcess(str(tmp_path / "fleet.db"), str(tmp_path / "server"), ["0.0.0.0:0"],
                               config={"rate_limit": 0})
        for index, (name, user_data) in enumerate(GUESTS.items()):
            guest = Guest(name, index, str(tmp_path / "roots"))
            guests.append(guest)
            guest.prepare(server.port)
            server.add(instance_id=f"i-{name}", name=f"{name} <b>guest</b>", hostname=f"{name}-host",
                       addresses=[guest.ip], user_data=user_data)
        browser = Browser()
        yield server, {g.name: g for g in guests}, browser
    finally:
        if browser is not None:
            browser.close()
        for guest in guests:
            guest.close()
        if server is not None:
            server.stop()


def artefact(tmp_path, name: str) -> str:
    folder = os.environ.get("CLOUDSEED_ARTEFACTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, name)


def page_state(browser) -> str:
    return browser.evaluate("(document.getElementById('facts') || {dataset: {}}).dataset.state || ''")


def test_a_booting_fleet_in_a_real_browser(fleet, tmp_path):
    server, guests, browser = fleet
    admin = f"http://127.0.0.1:{server.admin_port}"
    browser.navigate(f"{admin}/fleet")  # no session yet: the sign-in form
    assert browser.evaluate("location.pathname") == "/fleet/login"
    browser.evaluate(f"document.querySelector('input[name=token]').value = {json.dumps(ADMIN_TOKEN)}; "
                     "document.querySelector('form').submit()")
    browser.wait_for(lambda: browser.evaluate("location.pathname") == "/fleet" and
                     browser.evaluate("document.readyState") == "complete")
    assert browser.evaluate("document.querySelectorAll('#fleet-rows tr[data-state=pending]').length") == 4
    for guest in guests.values():
        guest.boot()
    # the failing guest's page, opened while it boots: live, and failed within a second of the report
    browser.navigate(f"{admin}/fleet/instances/i-fails")
    deadline = time.monotonic() + 60
    seen_provisioning = False
    while time.monotonic() < deadline:
        state = page_state(browser)
        seen_provisioning = seen_provisioning or state == "provisioning"
        if state == "failed":
            shown_at = time.time()
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the page never showed failed: {page_state(browser)!r}\n{server.log()[-2000:]}")
    assert seen_provisioning, "the page never showed the boot in progress"
    reports = server.admin("GET", "/v1/instances/i-fails/provisioning").json()["reports"]
    failing = next(r for r in reports if r.get("result") == "FAIL")
    assert failing["name"] == "modules-final/config-scripts_user"
    assert shown_at - failing["received_at"] < 1.0, shown_at - failing["received_at"]
    print(f"failed shown {shown_at - failing['received_at']:.3f}s after the report arrived", file=sys.stderr)
    failure = browser.evaluate("document.getElementById('failure').textContent")
    assert "modules-final/config-scripts_user" in failure and "scripts failed" in failure
    browser.screenshot(artefact(tmp_path, "fleet-instance-failed.png"))
    for guest in guests.values():
        guest.proc.wait(90)
    # every guest's end state on the fleet page (its rows refresh by themselves)
    browser.navigate(f"{admin}/fleet")
    want = {"i-ok": "done", "i-fails": "failed", "i-warns": "degraded", "i-hostile": "failed"}
    rows = ("Object.fromEntries([...document.querySelectorAll('#fleet-rows tr')]"
            ".map(r => [r.dataset.instance, r.dataset.state]))")
    browser.wait_for(lambda: browser.evaluate(rows) == want, 20)
    assert browser.evaluate("document.querySelectorAll('#fleet b').length") == 0  # names shown as text
    browser.screenshot(artefact(tmp_path, "fleet.png"))
    # a finished boot's timeline: stages and modules as bars, datasource, duration
    browser.navigate(f"{admin}/fleet/instances/i-ok")
    bars = browser.evaluate("[...document.querySelectorAll('#timeline g.bar')]"
                            ".map(g => [g.dataset.name, g.dataset.status])")
    names = [name for name, _ in bars]
    for stage in ("init-local", "init-network", "modules-config", "modules-final"):
        assert stage in names
    assert ["config-runcmd", "ok"] in bars and ["config-write_files", "ok"] in bars
    assert browser.evaluate("document.getElementById('datasource').textContent") == "NoCloud"
    assert browser.evaluate("document.getElementById('boot-seconds').textContent").endswith(" s")
    browser.screenshot(artefact(tmp_path, "fleet-instance-done.png"))
    # what an instance said is text, never markup or script; its secrets never shown
    browser.navigate(f"{admin}/fleet/instances/i-hostile")
    assert browser.evaluate("document.title") not in ("666", "667")
    assert browser.evaluate("document.querySelectorAll('img, #live script').length") == 0
    text = browser.evaluate("document.body.textContent")
    assert '<img src=x onerror="document.title=666">' in text and SECRET not in text and "REDACTED" in text
    assert SECRET not in json.dumps(server.admin("GET", "/v1/instances/i-hostile/provisioning").json())
    assert browser.console_errors() == []
    browser.screenshot(artefact(tmp_path, "fleet-instance-hostile.png"))
    for guest in guests.values():
        assert guest.proc.returncode in (0, 1), guest.proc.stderr.read()[-2000:]
    print("guests booted:", {g.name: g.proc.returncode for g in guests.values()}, file=sys.stderr)
