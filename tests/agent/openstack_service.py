"""An OpenStack-format metadata service on loopback for the agent's boot tests: one instance (``IID``)
with templated user-data, and the system config that points the agent at it."""

from __future__ import annotations

import contextlib
import json
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IID = "5b9a6c3e-7e61-4d6c-9a4a-3d1f0c0ffee1"


META = {"uuid": IID, "hostname": "svc-host", "name": "svc-host", "availability_zone": "zone-3",
        "public_keys": {"k": "ssh-ed25519 AAAAsvcKey svc@example"}}


USER_DATA = textwrap.dedent("""\
    ## template: jinja
    #cloud-config
    write_files:
      - path: /etc/seen-by-template
        content: "{{ v1.instance_id }} {{ v1.cloud_name }} {{ v1.availability_zone }}"
    """)


SYSTEM_CFG = textwrap.dedent("""\
    network: {config: disabled}
    datasource_list: [OpenStack, None]
    datasource:
      OpenStack: {metadata_urls: ["%s"], max_wait: 5, timeout: 2, retries: 0}
    cloud_init_modules: [write_files]
    cloud_config_modules: []
    cloud_final_modules: []
    """)


def _files() -> dict[str, bytes]:
    version = "2018-08-27"
    return {
        "/openstack": b"2012-08-10\n2018-08-27\nlatest\n",
        f"/openstack/{version}/meta_data.json": json.dumps(META).encode(),
        f"/openstack/{version}/user_data": USER_DATA.encode(),
    }


@contextlib.contextmanager
def serve():
    """An OpenStack-format metadata service on loopback; yields its URL."""
    files = _files()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = files.get(self.path.rstrip("/") or "/")
            self.send_response(200 if body is not None else 404)
            body = body if body is not None else b"not found"
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
