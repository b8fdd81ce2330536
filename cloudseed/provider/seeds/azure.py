"""Azure's provisioning media: an ISO 9660 image holding ``ovf-env.xml``, labelled ``rd_rdfe_stable.*``.

Azure attaches the document on a UDF (formerly ISO 9660) drive; the agent finds it by label
or by its content. The document comes from ``provider/instance_data/azure.py`` (what the IMDS
emulation serves for the same record): admin user, SSH keys, host name, custom data (the
user-data, base64), a password when ``clouds.azure.admin_password`` is set. With
``clouds.azure.os_type`` windows: the Windows provisioning set, the drive's tag file and
``CustomData.bin``, which is what Windows agents (cloudbase-init) read.
"""

from __future__ import annotations

from cloudseed.provider.seeds.spec import InstanceSpec

AZURE_LABEL = "rd_rdfe_stable.0"  # 16 characters: the Joliet volume id limit


# the file that marks the drive for Windows provisioning agents (cloudbase-init looks for it)
WINDOWS_DRIVE_TAG = "E6DA6616-8EC4-48E0-BE93-58CE6ACE3CFB.tag"


def azure_files(spec: InstanceSpec) -> dict[str, bytes]:
    from cloudseed.provider.instance_data.azure import is_windows, ovf_env

    record = spec.to_record()
    files = {"ovf-env.xml": ovf_env(record).encode("utf-8")}
    if is_windows(record):  # clouds.azure.os_type windows: the drive's tag, and the custom data as a file
        files[WINDOWS_DRIVE_TAG] = b""
        if spec.user_data:
            files["CustomData.bin"] = spec.user_data
    return files
