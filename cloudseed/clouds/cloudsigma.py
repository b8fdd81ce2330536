"""CloudSigma's server context as its guest reads it ("cepko"): over the serial port ``/dev/ttyS1``,
the request ``<\\n{key}\\n>`` (an empty key: the whole context) answered by one line of JSON ended by
EOT or a newline. No server of ours answers it yet.

Read by ``agent/datasources/cloudsigma.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

SERIAL = "/dev/ttyS1"

# the context's fields, by role (``meta``'s and ``vendor_data``'s too)
FIELDS = {"instance_id": "uuid", "name": "name", "meta": "meta", "vendor_data": "vendor_data",
          "ssh_public_key": "ssh_public_key", "user_data": "cloudinit-user-data", "dsmode": "cloudinit-dsmode",
          "base64_fields": "base64_fields", "vendor_cloudinit": "cloudinit"}

CLOUD = Cloud(
    "cloudsigma", datasource="CloudSigma", served=False,
    addresses=(SERIAL,),  # a serial port, not HTTP
    names={"serial": SERIAL, "ask": "<\n{key}\n>", "end": "\x04\n"},
    fields=FIELDS,
    requests={
        "context": Request("", form="json", fields=(FIELDS["instance_id"], FIELDS["meta"])),
    },
)
