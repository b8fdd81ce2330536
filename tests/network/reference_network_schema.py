"""Run by Debian's python3 with cloud-init 24.x+ importable (see tests/reference.py).

Usage: reference_network_schema.py FILE...
Each file's verdict with cloud-init's network-config schemas, as ``cloud-init schema -t
network-config -c FILE`` gives it on a system without netplan's Python API (netplan's own
validation, when present, is turned off so that every machine checks the same schemas). Prints
one JSON object: file -> [valid, [[path, message], ...]], or null when the reference skips it.
"""

import json
import sys

import yaml
from cloudinit.config import schema
from cloudinit.net import netplan

netplan.available = lambda: False
schema.netplan_available = lambda: False

out = {}
for path in sys.argv[1:]:
    with open(path) as f:
        cfg = yaml.safe_load(f)
    if not isinstance(cfg, dict) or not cfg.get("network", cfg):
        out[path] = None
        continue
    try:
        checked = schema.validate_cloudconfig_schema(
            cfg, schema_type=schema.SchemaType.NETWORK_CONFIG, strict=True)
        out[path] = [True, []] if checked else None
    except schema.SchemaValidationError as e:
        errors = [list(p) for p in e.schema_errors]
        out[path] = [not errors, errors]
print(json.dumps(out))
