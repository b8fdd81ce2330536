"""The None datasource: the last resort when nothing else answered.

It provides only what the system config gives under ``datasource: None:`` (``metadata``,
``userdata_raw``); the instance id is ``iid-datasource-none``. Modules still run, so the
image's own configuration (users, SSH host keys) still applies.
"""

from __future__ import annotations

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource


class NoneDatasource(Datasource):
    name = "None"
    stages = (LOCAL, NETWORK)
    platform = "none"
    fallback = True

    def fetch(self) -> bool:
        cfg = self.ctx.ds_cfg("None")
        metadata = cfg.get("metadata") if isinstance(cfg.get("metadata"), dict) else {}
        self.metadata = {"instance-id": "iid-datasource-none", **metadata}
        userdata = cfg.get("userdata_raw")
        self.userdata_raw = userdata.encode("utf-8") if isinstance(userdata, str) else None
        self.cloud_name = "none"
        self.subplatform = "config"
        self.raw = {"meta_data": self.metadata}
        return True


DATASOURCE = NoneDatasource
