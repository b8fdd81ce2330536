"""Merging cloud-config parts (merge_how / Merge-Type) and vendor-data under user-data."""

from __future__ import annotations

import pytest

from cloudseed.agent.userdata import merge_vendor_under_user, process_userdata, vendor_data_policy
from cloudseed.agent.userdata.merging import Merger, MergeSpecError, parse_merge_string, pop_merge_spec

BASE = "#cloud-config\nruncmd: [a, b]\nntp: {servers: [s1], enabled: true}\nmsg: hello\nname: one\n"


def two_parts(second: str, header: str = "") -> bytes:
    extra = f"\n{header}" if header else ""
    return (f'Content-Type: multipart/mixed; boundary="B"\nMIME-Version: 1.0\n\n'
            f"--B\nContent-Type: text/cloud-config\n\n{BASE}\n"
            f"--B\nContent-Type: text/cloud-config{extra}\n\n{second}\n--B--\n").encode()


def test_default_later_top_level_keys_replace_whole_values():
    r = process_userdata(two_parts("#cloud-config\nruncmd: [c]\nntp: {servers: [s2]}"))
    assert r.cloud_config == {"runcmd": ["c"], "ntp": {"servers": ["s2"]}, "msg": "hello", "name": "one"}


def test_list_append_with_recursing_dicts():
    r = process_userdata(two_parts("#cloud-config\nmerge_how: 'list(append)+dict(recurse_array)+str()'\n"
                                   "runcmd: [c]\nntp: {servers: [s2]}\nname: two"))
    assert r.cloud_config["runcmd"] == ["a", "b", "c"]
    assert r.cloud_config["ntp"] == {"servers": ["s1", "s2"], "enabled": True}
    assert r.cloud_config["name"] == "one"          # no_replace is the dict default
    assert "merge_how" not in r.cloud_config


def test_merge_type_header_with_prepend():
    r = process_userdata(two_parts("#cloud-config\nruncmd: [z]",
                                   "Merge-Type: list(prepend)+dict(recurse_array,no_replace)+str()"))
    assert r.cloud_config["runcmd"] == ["z", "a", "b"]


def test_x_merge_type_header():
    r = process_userdata(two_parts("#cloud-config\nruncmd: [z]",
                                   "X-Merge-Type: list(append)+dict(recurse_array)+str()"))
    assert r.cloud_config["runcmd"] == ["a", "b", "z"]


def test_dict_replace():
    r = process_userdata(two_parts("#cloud-config\nmerge_how: dict(replace)+list(append)\nname: two\n"
                                   "runcmd: [c]"))
    assert r.cloud_config["name"] == "two" and r.cloud_config["runcmd"] == ["c"]


def test_dict_no_replace_keeps_existing():
    r = process_userdata(two_parts("#cloud-config\nmerge_how: dict(no_replace)\nname: two\nnew: 1"))
    assert r.cloud_config["name"] == "one" and r.cloud_config["new"] == 1


def test_allow_delete():
    r = process_userdata(two_parts("#cloud-config\nmerge_how: dict(replace,allow_delete)+list()+str()\n"
                                   "ntp: null"))
    assert "ntp" not in r.cloud_config


def test_str_append():
    r = process_userdata(two_parts("#cloud-config\nmerge_how: dict(no_replace,recurse_str)+str(append)\n"
                                   "msg: ' world'"))
    assert r.cloud_config["msg"] == "hello world"


def test_list_no_replace_keeps_old_list():
    r = process_userdata(two_parts("#cloud-config\nmerge_how: dict(recurse_array)+list(no_replace)\n"
                                   "runcmd: [x, y, z]"))
    assert r.cloud_config["runcmd"] == ["a", "b"]


def test_list_replace_is_position_by_position():
    merger = Merger.from_string("list(replace)")
    assert merger.merge([1, 2, 3], [9]) == [9, 2, 3]


def test_merge_how_list_of_mappings():
    r = process_userdata(two_parts("#cloud-config\nmerge_how:\n - name: list\n   settings: [append]\n"
                                   " - name: dict\n   settings: [no_replace, recurse_list]\nruncmd: [c]"))
    assert r.cloud_config["runcmd"] == ["a", "b", "c"]


def test_unknown_merger_is_reported_and_part_skipped():
    r = process_userdata(two_parts("#cloud-config\nmerge_how: 'tree(append)'\nname: two"))
    assert r.cloud_config["name"] == "one"
    assert len(r.errors) == 1 and "part-002" in r.errors[0] and "tree" in r.errors[0]


def test_malformed_merge_string():
    with pytest.raises(MergeSpecError):
        parse_merge_string("list append")


def test_pop_merge_spec_removes_the_key():
    cfg = {"merge_type": "list(append)", "a": 1}
    assert pop_merge_spec(cfg) == [("list", ["append"])] and cfg == {"a": 1}


def test_vendor_fills_in_only_what_user_did_not_set():
    user = {"hostname": "u", "ntp": {"servers": ["u1"]}, "runcmd": ["u"]}
    vendor = {"hostname": "v", "ntp": {"servers": ["v1"], "enabled": True}, "runcmd": ["v1", "v2"],
              "packages": ["vp"]}
    assert merge_vendor_under_user(vendor, user) == {
        "hostname": "u", "ntp": {"servers": ["u1"], "enabled": True}, "runcmd": ["u"], "packages": ["vp"]}
    assert user == {"hostname": "u", "ntp": {"servers": ["u1"]}, "runcmd": ["u"]}   # not modified


def test_vendor_with_none_sides():
    assert merge_vendor_under_user(None, {"a": 1}) == {"a": 1}
    assert merge_vendor_under_user({"b": 2}, None) == {"b": 2}


def test_vendor_data_policy():
    assert vendor_data_policy({}).enabled
    assert not vendor_data_policy({"vendor_data": {"enabled": False}}).enabled
    assert not vendor_data_policy({"vendor_data": {"enabled": "no"}}).enabled
    policy = vendor_data_policy({"vendor_data": {"enabled": True, "disabled_handlers": ["text/x-shellscript"]}})
    assert policy.enabled and policy.disabled_handlers == ["text/x-shellscript"]
    bad = vendor_data_policy({"vendor_data": "off"})
    assert not bad.enabled and "mapping" in bad.problem
