"""Azure's provisioning media: an ISO 9660 image holding ``ovf-env.xml``, labelled ``rd_rdfe_stable.*``.

Azure attaches the document on a UDF (formerly ISO 9660) drive; the agent finds it by label
or by its content. The document comes from ``provider/instance_data/azure.py`` (what the IMDS
emulation serves for the same record): admin user, SSH keys, host name, custom data (the
user-data, base64), a password when ``clouds.azure.admin_password`` is set.
"""

from __future__ import annotations

from cloudseed.provider.seeds.spec import InstanceSpec

AZURE_LABEL = "rd_rdfe_stable.0"  # 16 characters: the Joliet volume id limit


def azure_files(spec: InstanceSpec) -> dict[str, bytes]:
    from cloudseed.provider.instance_data.azure import ovf_env

    return {"ovf-env.xml": ovf_env(spec.to_record()).encode("utf-8")}
