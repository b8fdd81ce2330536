"""Each user-data format on its own: what it becomes after processing."""

from __future__ import annotations

import base64
import gzip

from cloudseed.agent.userdata import process_userdata


def mime(*parts: tuple[str, str], boundary: str = "XX") -> bytes:
    out = f'Content-Type: multipart/mixed; boundary="{boundary}"\nMIME-Version: 1.0\n\n'
    for headers, body in parts:
        out += f"--{boundary}\n{headers}\n\n{body}\n"
    return (out + f"--{boundary}--\n").encode()


def test_cloud_config():
    r = process_userdata("#cloud-config\nhostname: h1\npackages: [a, b]\n")
    assert r.cloud_config == {"hostname": "h1", "packages": ["a", "b"]}
    assert r.errors == [] and r.scripts == []


def test_no_cloud_config_part_gives_none():
    assert process_userdata("#!/bin/sh\ntrue\n").cloud_config is None


def test_script_named_part_001():
    r = process_userdata(b"#!/bin/bash\necho hi\n")
    assert [(p.name, p.content) for p in r.scripts] == [("part-001", b"#!/bin/bash\necho hi\n")]
    assert r.scripts[0].content_type == "text/x-shellscript"


def test_crlf_script_is_converted():
    r = process_userdata(b"#!/bin/sh\r\necho a\r\n")
    assert r.scripts[0].content == b"#!/bin/sh\necho a\n"


def test_boothook_header_is_stripped():
    r = process_userdata("#cloud-boothook\n#!/bin/sh\necho hook\n")
    assert [(p.name, p.content) for p in r.boothooks] == [("part-001", b"#!/bin/sh\necho hook\n")]


def test_mime_parts_keep_filenames_and_number_the_rest():
    blob = mime(("Content-Type: text/cloud-config", "#cloud-config\na: 1"),
                ('Content-Type: text/x-shellscript\nContent-Disposition: attachment; filename="go.sh"',
                 "#!/bin/sh\necho go"),
                ("Content-Type: text/x-shellscript", "#!/bin/sh\necho third"))
    r = process_userdata(blob)
    assert r.cloud_config == {"a": 1}
    assert [p.name for p in r.scripts] == ["go.sh", "part-003"]
    assert r.scripts[0].filename == "go.sh"


def test_nested_mime_is_flattened_in_order():
    inner = ('Content-Type: multipart/alternative; boundary="IN"',
             "--IN\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho inner\n--IN--")
    blob = mime(("Content-Type: text/x-shellscript", "#!/bin/sh\necho outer"), inner,
                ("Content-Type: text/cloud-config", "#cloud-config\nx: 2"))
    r = process_userdata(blob)
    assert [p.name for p in r.scripts] == ["part-001", "part-002"]
    assert r.scripts[1].content == b"#!/bin/sh\necho inner"
    assert r.cloud_config == {"x": 2}


def test_gzip_blob_by_magic():
    r = process_userdata(gzip.compress(b"#cloud-config\nzipped: true\n"))
    assert r.cloud_config == {"zipped": True}


def test_gzipped_mime():
    blob = gzip.compress(mime(("Content-Type: text/cloud-config", "#cloud-config\nin_gzip_mime: 1"),
                              ("Content-Type: text/x-shellscript", "#!/bin/sh\ntrue")))
    r = process_userdata(blob)
    assert r.cloud_config == {"in_gzip_mime": 1}
    assert [p.name for p in r.scripts] == ["part-002"]


def test_gzip_mime_part_keeps_its_filename():
    payload = base64.encodebytes(gzip.compress(b"#!/bin/sh\necho z\n")).decode()
    blob = mime(("Content-Type: application/x-gzip\nContent-Transfer-Encoding: base64\n"
                 'Content-Disposition: attachment; filename="z.sh"', payload))
    r = process_userdata(blob)
    assert [(p.name, p.content) for p in r.scripts] == [("z.sh", b"#!/bin/sh\necho z\n")]


def test_text_plain_is_typed_by_its_content():
    r = process_userdata(mime(("Content-Type: text/plain", "#cloud-config\np: 1"),
                              ("Content-Type: text/plain", "#cloud-boothook\necho b")))
    assert r.cloud_config == {"p": 1}
    assert [p.name for p in r.boothooks] == ["part-002"]


def test_per_frequency_scripts():
    r = process_userdata(mime(
        ('Content-Type: text/x-shellscript-per-boot\nContent-Disposition: attachment; filename="b.sh"',
         "#!/bin/sh\necho boot"),
        ("Content-Type: text/x-shellscript-per-instance", "#!/bin/sh\necho instance"),
        ("Content-Type: text/x-shellscript-per-once", "#!/bin/sh\necho once")))
    names = {freq: [p.name for p in parts] for freq, parts in r.scripts_per_freq.items()}
    assert names == {"per-boot": ["b.sh"], "per-instance": ["part-002"], "per-once": ["part-003"]}
    assert r.scripts == []


def test_part_handler_is_recorded_not_run(tmp_path):
    marker = tmp_path / "ran"
    code = f"#part-handler\nopen({str(marker)!r}, 'w').write('x')\ndef list_types():\n    return []\n"
    r = process_userdata(code)
    assert [h.name for h in r.handlers] == ["part-handler-000"]
    assert r.handlers[0].content == code.encode()
    assert not marker.exists()


def test_cloud_config_archive():
    archive = ("#cloud-config-archive\n"
               "- type: text/cloud-config\n  content: |\n    #cloud-config\n    a: 1\n"
               "- content: |\n    #!/bin/sh\n    echo s\n  filename: s.sh\n"
               "- |\n  #cloud-config\n  b: 2\n")
    r = process_userdata(archive)
    assert r.cloud_config == {"a": 1, "b": 2}
    assert [(p.name, p.content) for p in r.scripts] == [("s.sh", b"#!/bin/sh\necho s\n")]


def test_archive_entry_without_type_defaults_to_cloud_config():
    r = process_userdata("#cloud-config-archive\n- content: 'untyped: yes'\n")
    assert r.cloud_config == {"untyped": True}


def test_jinja_cloud_config_uses_instance_data_and_aliases():
    data = {"v1": {"local_hostname": "box"}, "ds": {"meta_data": {"local-hostname": "md-box"}}}
    tpl = ("## template: jinja\n#cloud-config\nhostname: {{ v1.local_hostname }}\n"
           "short: {{ local_hostname }}\nmd: {{ ds.meta_data.local_hostname }}\n")
    r = process_userdata(tpl, instance_data=data)
    assert r.cloud_config == {"hostname": "box", "short": "box", "md": "md-box"}
    assert r.errors == []


def test_jinja_script():
    r = process_userdata("## template: jinja\n#!/bin/sh\necho {{ v1.region }}\n",
                         instance_data={"v1": {"region": "r1"}})
    assert [(p.name, p.content) for p in r.scripts] == [("part-001", b"#!/bin/sh\necho r1\n")]


def test_jinja_base64_encoded_keys_are_decoded():
    data = {"ds": {"secret": base64.b64encode(b"plain").decode()}, "base64-encoded-keys": ["ds/secret"]}
    r = process_userdata("## template: jinja\n#cloud-config\ns: {{ ds.secret }}\n", instance_data=data)
    assert r.cloud_config == {"s": "plain"}


def test_jinja_missing_variable_is_reported_and_marked():
    r = process_userdata("## template: jinja\n#cloud-config\nx: {{ nope }}\n", instance_data={})
    assert r.cloud_config == {"x": "CI_MISSING_JINJA_VAR/nope"}
    assert len(r.errors) == 1 and "nope" in r.errors[0] and "part-001" in r.errors[0]


def test_jinja_without_instance_data_is_an_error():
    r = process_userdata("## template: jinja\n#cloud-config\nx: 1\n")
    assert r.cloud_config is None
    assert "part-001" in r.errors[0] and "instance data" in r.errors[0]


def test_jinja_syntax_error_names_the_line():
    r = process_userdata("## template: jinja\n#cloud-config\nx: {{ 1 +\n", instance_data={})
    assert "part-001" in r.errors[0] and "line" in r.errors[0]


def test_jsonp_patch_applies_to_merged_config():
    r = process_userdata(mime(
        ("Content-Type: text/cloud-config", "#cloud-config\npackages: [a]\nhostname: old"),
        ("Content-Type: text/cloud-config-jsonp",
         '[{"op": "add", "path": "/packages/-", "value": "b"},'
         ' {"op": "replace", "path": "/hostname", "value": "new"}]')))
    assert r.cloud_config == {"packages": ["a", "b"], "hostname": "new"}


def test_jsonp_failing_patch_changes_nothing():
    r = process_userdata(mime(
        ("Content-Type: text/cloud-config", "#cloud-config\na: 1"),
        ("Content-Type: text/cloud-config-jsonp",
         '[{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/missing"}]')))
    assert r.cloud_config == {"a": 1}
    assert "part-002" in r.errors[0] and "missing" in r.errors[0]


def test_base64_transfer_encoding():
    body = base64.encodebytes(b"#!/bin/sh\necho b64\n").decode()
    r = process_userdata(mime(("Content-Type: text/x-shellscript\nContent-Transfer-Encoding: base64", body)))
    assert r.scripts[0].content == b"#!/bin/sh\necho b64\n"


def test_unsafe_filenames_are_cleaned():
    r = process_userdata(mime(
        ('Content-Type: text/x-shellscript\nContent-Disposition: attachment; filename="a b/c!.sh"',
         "#!/bin/sh\ntrue"),
        ('Content-Type: text/x-shellscript-per-boot\nContent-Disposition: attachment; filename="d/e.sh"',
         "#!/bin/sh\ntrue")))
    assert [p.name for p in r.scripts] == ["ab_c.sh"]
    assert [p.name for p in r.scripts_per_freq["per-boot"]] == ["e.sh"]


def test_vendor_style_excluded_types_are_skipped():
    blob = mime(("Content-Type: text/x-shellscript", "#!/bin/sh\ntrue"),
                ("Content-Type: text/cloud-config", "#cloud-config\nv: 1"))
    r = process_userdata(blob, excluded_types=["text/x-shellscript"])
    assert r.scripts == [] and r.cloud_config == {"v": 1}


def test_launch_index_filters_parts():
    blob = mime(("Content-Type: text/x-shellscript\nLaunch-Index: 0", "#!/bin/sh\necho zero"),
                ("Content-Type: text/x-shellscript\nLaunch-Index: 1", "#!/bin/sh\necho one"),
                ("Content-Type: text/x-shellscript", "#!/bin/sh\necho all"))
    r = process_userdata(blob, launch_index=1)
    assert [p.name for p in r.scripts] == ["part-002", "part-003"]


def test_to_json_shape():
    r = process_userdata("#!/bin/sh\necho\n")
    assert r.to_json() == {
        "cloud_config": None, "scripts": [{"name": "part-001", "content": "#!/bin/sh\necho\n"}],
        "boothooks": [], "scripts_per_freq": {"per-boot": [], "per-instance": [], "per-once": []},
        "handlers": [], "errors": []}


def test_boot_path_imports_stay_light():
    # A plain cloud-config must not pull in email, jinja2 or the HTTP client.
    import subprocess
    import sys

    code = ("import sys\nfrom cloudseed.agent.userdata import process_userdata\n"
            "assert process_userdata(b'#cloud-config\\na: 1\\n').cloud_config == {'a': 1}\n"
            "print(sorted(m for m in ('email', 'jinja2', 'urllib.request', 'http.client', 'gzip') "
            "if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
