"""Write a seed as an ISO 9660 image with Joliet and Rock Ridge, through pycdlib.

The plain ISO 9660 names are mangled to the interchange level 3 character set (upper case,
digits and '_'); Rock Ridge and Joliet carry the real names, which is what Linux and Windows
read. Files and directories are added in sorted order under a frozen clock, so the same files
always give the same bytes.
"""

from __future__ import annotations

import io
import re
from typing import BinaryIO

from cloudseed.provider.seeds.clock import frozen_clock
from cloudseed.provider.seeds.names import check_paths

_NOT_D_CHARS = re.compile(r"[^A-Z0-9_]")
_MAX_NAME = 30  # interchange levels 2 and 3: name + '.' + extension


def _mangle(name: str, is_dir: bool, taken: set[str]) -> str:
    """An ISO 9660 name for ``name`` that is unique among ``taken`` (which it joins)."""
    upper = name.upper()
    if is_dir:
        stem, ext = _NOT_D_CHARS.sub("_", upper)[:_MAX_NAME], ""
    else:
        stem, dot, ext = upper.rpartition(".")
        if not dot:
            stem, ext = upper, ""
        stem, ext = _NOT_D_CHARS.sub("_", stem) or "_", _NOT_D_CHARS.sub("_", ext)[:8]
        stem = stem[:_MAX_NAME - 1 - len(ext)]
    counter = 0
    candidate = stem
    while True:
        full = candidate if is_dir else f"{candidate}.{ext}"
        if full not in taken:
            taken.add(full)
            return full
        counter += 1
        suffix = f"_{counter}"
        candidate = stem[:_MAX_NAME - 1 - len(ext) - len(suffix)] + suffix


def write_iso(files: dict[str, bytes], label: str, out: BinaryIO, epoch: int | None = None,
              udf: bool = False) -> None:
    """Write ``files`` (relative path -> content) as an ISO 9660 image labelled ``label``; with
    ``udf``, a UDF volume over the same files too (blkid then calls it udf: Azure's media)."""
    import pycdlib

    check_paths(files, "iso9660")
    if udf:  # pycdlib names the UDF volume set with random bits: the same files, the same bytes
        import random

        import pycdlib.udf

        saved_random = pycdlib.udf.random
        pycdlib.udf.random = random.Random(label)  # type: ignore[assignment]
        try:
            return _write(files, label, out, epoch, pycdlib, "2.60")
        finally:
            pycdlib.udf.random = saved_random
    return _write(files, label, out, epoch, pycdlib, None)


def _write(files: dict[str, bytes], label: str, out: BinaryIO, epoch: int | None, pycdlib, udf) -> None:
    directories = sorted({"/".join(path.split("/")[:i]) for path in files
                          for i in range(1, path.count("/") + 1)})
    with frozen_clock(epoch):
        iso = pycdlib.PyCdlib()
        iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident=label,
                sys_ident="LINUX", app_ident_str="CLOUDSEED", udf=udf)
        udf_path = (lambda path: "/" + path) if udf else (lambda path: None)
        iso_names: dict[str, str] = {"": ""}
        taken: dict[str, set[str]] = {}
        for directory in directories:
            parent, _, name = directory.rpartition("/")
            iso_dir = iso_names[parent] + "/" + _mangle(name, True, taken.setdefault(parent, set()))
            iso_names[directory] = iso_dir
            iso.add_directory(iso_dir, rr_name=name, joliet_path="/" + directory, udf_path=udf_path(directory))
        for path in sorted(files):
            parent, _, name = path.rpartition("/")
            iso_file = iso_names[parent] + "/" + _mangle(name, False, taken.setdefault(parent, set()))
            data = files[path]
            iso.add_fp(io.BytesIO(data), len(data), iso_file + ";1", rr_name=name, joliet_path="/" + path,
                       udf_path=udf_path(path))
        iso.write_fp(out)
        iso.close()
