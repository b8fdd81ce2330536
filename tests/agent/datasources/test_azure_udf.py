"""Azure's provisioning media on UDF: built by ``seed build --kind azure --fs udf`` and by other
writers (genisoimage -udf, mkudffs), read by the agent's userspace UDF reader (``_udf``) without
mounting, and by the Azure datasource from such a disc. Hostile and truncated images are errors
naming the problem, bounded.

This host's kernel has no ``udf`` module (``modprobe udf`` fails), so no test mounts UDF: the agent
reads it in userspace first and mounts only when that fails (a UDF 2.50 metadata partition). The
lab VM's Debian kernel has the module (``tests/e2e/test_cloud_boots.py`` boots with UDF media).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import pytest

from cloudseed.agent.datasources._udf import UdfError, read_root_file
from cloudseed.agent.devices import is_udf

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3udfKey alice@example"
USER_DATA = "#cloud-config\nhostname: from-udf\n"
MAX = 1024 * 1024


def build(tmp_path, name="ovf.udf", fs="udf", *extra):
    out = tmp_path / name
    (tmp_path / "key.pub").write_text(KEY + "\n")
    (tmp_path / "ud").write_text(USER_DATA)
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "seed", "build", "--kind", "azure", "--fs", fs,
                           "--instance-id", "iid-udf", "--hostname", "udf-host", "--ssh-key", str(tmp_path / "key.pub"),
                           "--user-data", str(tmp_path / "ud"), "-o", str(out), *extra], capture_output=True, text=True,
                          timeout=120)
    return proc, out


def blkid(path) -> dict:
    if not shutil.which("blkid"):
        pytest.skip("blkid is not installed")
    out = subprocess.run(["blkid", "-p", "-o", "export", str(path)], capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def udf_only(source, target) -> None:
    """``source`` (UDF with an ISO 9660 bridge) without its ISO 9660 descriptors: the volume
    recognition sequence (BEA01, NSR02, TEA01) moved to sector 16, the CD001 ones gone."""
    data = bytearray(source.read_bytes())
    sectors = [data[n * 2048:(n + 1) * 2048] for n in range(16, 32)]
    keep = [s for s in sectors if s[1:6] in (b"BEA01", b"NSR02", b"NSR03", b"TEA01")]
    assert len(keep) == 3, "expected BEA01, NSR02, TEA01 after the ISO descriptors"
    vrs = b"".join(keep) + bytes(2048 * (16 - len(keep)))
    data[16 * 2048:32 * 2048] = vrs
    target.write_bytes(bytes(data))


def test_seed_build_writes_udf_media_reproducibly(tmp_path):
    proc, image = build(tmp_path)
    assert proc.returncode == 0, proc.stderr
    again, second = build(tmp_path, "again.udf")
    assert again.returncode == 0 and image.read_bytes() == second.read_bytes()
    found = blkid(image)
    assert found.get("TYPE") == "udf" and found.get("LABEL") == "rd_rdfe_stable.0"  # as Azure's disc shows
    assert is_udf(str(image))
    document = read_root_file(str(image), "ovf-env.xml", MAX)
    from cloudseed.agent.datasources._azure_ovf import parse

    ovf = parse(document)
    assert ovf.hostname == "udf-host" and ovf.key_values == [KEY] and ovf.custom_data == USER_DATA.encode()
    if shutil.which("udfinfo"):  # udftools' own reader agrees it is a UDF volume with one file
        info = subprocess.run(["udfinfo", str(image)], capture_output=True, text=True)
        assert info.returncode == 0 and "numfiles=1" in info.stdout and "label=rd_rdfe_stable.0" in info.stdout
    for kind, fs in (("nocloud", "udf"), ("azure", "vfat")):
        refused = subprocess.run([sys.executable, "-m", "cloudseed", "seed", "build", "--kind", kind, "--fs", fs,
                                  "--instance-id", "i", "-o", str(tmp_path / "x")], capture_output=True, text=True)
        assert refused.returncode != 0 and "udf" in refused.stderr.lower()


def test_udf_only_media_is_read_without_the_iso_bridge(tmp_path):
    proc, hybrid = build(tmp_path)
    assert proc.returncode == 0, proc.stderr
    only = tmp_path / "only.udf"
    udf_only(hybrid, only)
    found = blkid(only)
    assert found.get("TYPE") == "udf" and "iso9660" not in str(found)
    from cloudseed.agent.devices import _label_of

    assert _label_of(str(only)) is None  # no ISO 9660 label left: only the UDF recognition finds it
    assert is_udf(str(only))
    assert b"<wa:HostName>udf-host</wa:HostName>" in read_root_file(str(only), "ovf-env.xml", MAX)


def test_media_from_other_writers(tmp_path):
    """genisoimage's UDF 1.02 (2048-byte blocks) and mkudffs's UDF 2.01 (512-byte blocks)."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "ovf-env.xml").write_text("<Environment/>\n")
    (source / "other.txt").write_text("x" * 5000)
    if shutil.which("genisoimage"):
        image = tmp_path / "g.iso"
        subprocess.run(["genisoimage", "-quiet", "-udf", "-V", "rd_rdfe_stable.0", "-o", str(image), str(source)],
                       check=True)
        assert read_root_file(str(image), "ovf-env.xml", MAX) == b"<Environment/>\n"
        assert read_root_file(str(image), "other.txt", MAX) == b"x" * 5000
        only = tmp_path / "g-only.udf"
        udf_only(image, only)
        assert read_root_file(str(only), "ovf-env.xml", MAX) == b"<Environment/>\n"
    if not shutil.which("mkudffs"):
        pytest.skip("mkudffs (udftools) is not installed")
    empty = tmp_path / "m.img"
    with open(empty, "wb") as f:
        f.truncate(8 * 1024 * 1024)
    subprocess.run(["mkudffs", "--label=rd_rdfe_stable.0", str(empty)], check=True, capture_output=True)
    with pytest.raises(UdfError, match="no ovf-env.xml in the root directory"):
        read_root_file(str(empty), "ovf-env.xml", MAX)
    assert is_udf(str(empty))


def test_hostile_and_truncated_images_are_errors(tmp_path):
    proc, image = build(tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = image.read_bytes()
    cases = {
        "not UDF at all": (bytes(600 * 2048), "no UDF anchor"),
        "truncated before the anchor": (data[:200 * 2048], "no UDF anchor"),
    }
    # the anchor's checksum broken
    broken = bytearray(data)
    broken[256 * 2048 + 4] ^= 0xFF
    cases["anchor checksum"] = (bytes(broken), "no UDF anchor")
    # the main sequence pointing past the end of the volume
    far = bytearray(data)
    struct.pack_into("<I", far, 256 * 2048 + 20, 0x7FFFFFF0)
    cases["sequence beyond the end"] = (bytes(far), "beyond the end")
    # a partition map of type 2 (UDF 2.50's metadata partition, or a virtual one): the caller then mounts
    typed = bytearray(data)
    lvd = next(n for n in range(16, 300) if struct.unpack_from("<H", typed, n * 2048)[0] == 6)
    assert typed[lvd * 2048 + 440] == 1
    typed[lvd * 2048 + 440] = 2
    cases["partition map type 2"] = (bytes(typed), "partition maps other than type 1")
    for content, message in cases.values():
        path = tmp_path / "bad.img"
        path.write_bytes(content)
        with pytest.raises(UdfError, match=message):
            read_root_file(str(path), "ovf-env.xml", MAX)
    # a file larger than the caller's limit is refused, not read
    with pytest.raises(UdfError, match="more than 10"):
        read_root_file(str(image), "ovf-env.xml", 10)
    # cut inside the file's data (after the descriptors and the anchor): its extent is beyond the end
    start = data.find(b"<?xml version")
    assert start > 257 * 2048, "the file's data is expected after the anchor"
    path = tmp_path / "cut.img"
    path.write_bytes(data[:start + 100])
    with pytest.raises(UdfError, match="ovf-env.xml: beyond the end of the volume"):
        read_root_file(str(path), "ovf-env.xml", MAX)


def test_the_datasource_reads_the_udf_disc(tmp_path, monkeypatch):
    """The Azure datasource takes ovf-env.xml from a UDF-only disc in userspace (no mount)."""
    from cloudseed.agent.datasources import DatasourceContext, azure
    from cloudseed.agent.state import Paths
    from cloudseed.core.root import TargetRoot

    proc, hybrid = build(tmp_path)
    assert proc.returncode == 0, proc.stderr
    disc = tmp_path / "disc.udf"
    udf_only(hybrid, disc)
    # the disc stands in for the machine's block devices: detection and fetch both scan them
    monkeypatch.setattr("cloudseed.agent.devices._block_devices", lambda: [str(disc)])

    def no_mount(*args, **kwargs):
        raise AssertionError("the UDF disc must be read without mounting")

    monkeypatch.setattr("cloudseed.agent.devices.mounted_readonly", no_mount)
    root = TargetRoot(str(tmp_path / "root"))
    os.makedirs(tmp_path / "root", exist_ok=True)
    ctx = DatasourceContext(root=root, cfg={"datasource": {"Azure": {"max_wait": 0, "report_ready": False}}},
                            cmdline="", paths=Paths(root), stage="network")
    assert "Azure provisioning media on" in azure.Azure.why(ctx)
    ds = azure.Azure(ctx)
    assert ds.fetch() is True
    assert ds.local_hostname == "udf-host" and ds.public_keys == [KEY]
    assert ds.userdata_raw == USER_DATA.encode() and f"{disc}, UDF" in ds.subplatform
