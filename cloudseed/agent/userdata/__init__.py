"""User-data and vendor-data: cloud-init's formats turned into config, scripts and hooks.

``process_userdata(blob)`` returns a ``ProcessedUserData`` (merged cloud-config, scripts,
boothooks, per-frequency scripts, part-handlers, errors). Vendor-data is processed with the
same function; ``merge_vendor_under_user`` combines the two configurations and
``vendor_data_policy`` reads whether (and which parts of) vendor-data may be used.
Part-handlers are only recorded; ``run_part_handlers`` (in ``part_handlers``) runs them later.
"""

from __future__ import annotations

from cloudseed.agent.userdata.merging import merge_configs, merge_vendor_under_user
from cloudseed.agent.userdata.parts import Part, ProcessedUserData
from cloudseed.agent.userdata.process import process_userdata
from cloudseed.agent.userdata.vendor import VendorDataPolicy, vendor_data_policy

__all__ = [
    "Part", "ProcessedUserData", "VendorDataPolicy", "merge_configs", "merge_vendor_under_user",
    "process_userdata", "vendor_data_policy",
]
