"""The clouds' contracts are declared once: every file loads, names are not taken twice, each is read
by its datasource and its server API, and nothing else in the package spells its paths or headers."""

from __future__ import annotations

import ast
import os
import sys
import textwrap

import pytest

import cloudseed
from cloudseed.clouds import Cloud, DuplicateCloud, declared, served

PACKAGE = os.path.dirname(os.path.abspath(cloudseed.__file__))
CLOUDS = declared()
SERVED = served()
# the clouds the server answers with handle(app, request, instance) in provider/server/apis/<name>.py
# (routes.CLOUD_APIS); EC2 and OpenStack are answered in metadata_app.py, their paths routed by routes.py
SERVED_IN_APP = {"ec2": "provider/server/routes.py", "openstack": "provider/server/routes.py"}
HTTP_HEADERS = {"Accept", "Content-Type", "User-Agent", "Authorization"}  # HTTP's own: their values are the cloud's


def _package(tmp_path, files: dict[str, str]) -> str:
    """A throw-away package beside the real one, named ``fakeclouds<n>``, holding ``files``."""
    name = f"fakeclouds{len(sys.modules)}"
    top = tmp_path / name
    top.mkdir()
    (top / "__init__.py").write_text("")
    for rel, text in files.items():
        (top / rel).write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))  # the throw-away package this test made, importable by name
    return name


DECLARATION = """\
from cloudseed.clouds import Cloud, Request
CLOUD = Cloud("{name}", datasource="{ds}", addresses=("http://192.0.2.1",), requests={{"x": Request("/x")}})
"""


@pytest.mark.parametrize(("second", "refused"), [
    ({"name": "acme", "ds": "Other"}, r"acme2\.py: cloud 'acme' is already declared in .*acme\.py"),
    ({"name": "acme2", "ds": "Acme"}, r"acme2\.py: datasource 'Acme' is already declared in .*acme\.py"),
], ids=["one cloud in two files", "one datasource for two clouds"])
def test_a_name_declared_twice_is_refused(tmp_path, second, refused):
    name = _package(tmp_path, {"acme.py": DECLARATION.format(name="acme", ds="Acme"),
                               "acme2.py": DECLARATION.format(**second)})
    try:
        with pytest.raises(DuplicateCloud, match=refused):
            declared(str(tmp_path / name), name)
    finally:
        sys.path.remove(str(tmp_path))


def test_a_file_without_a_cloud_is_named(tmp_path):
    name = _package(tmp_path, {"empty.py": "CLOUD = {'name': 'x'}\n"})
    try:
        with pytest.raises(TypeError, match=r"empty\.py: CLOUD must be a cloudseed.clouds.Cloud, got dict"):
            declared(str(tmp_path / name), name)
    finally:
        sys.path.remove(str(tmp_path))


def _imports(path: str) -> set[str]:
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # from package import module
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("name", sorted(CLOUDS))
def test_the_datasource_and_the_server_api_read_the_contract(name):
    cloud: Cloud = CLOUDS[name]
    assert cloud.name == name and cloud.requests, name
    module = f"cloudseed.clouds.{name}"
    datasource = os.path.join(PACKAGE, "agent", "datasources", f"{cloud.datasource.lower()}.py")
    assert os.path.exists(datasource), f"clouds/{name}.py names datasource {cloud.datasource}: no {datasource}"
    from importlib import import_module

    assert import_module(f"cloudseed.agent.datasources.{cloud.datasource.lower()}").DATASOURCE.name == cloud.datasource
    assert module in _imports(datasource), f"{datasource} does not import {module}"
    server = os.path.join(PACKAGE, SERVED_IN_APP.get(name, f"provider/server/apis/{name}.py"))
    if not cloud.served:  # its guest's side only, for now: no API, and the server routes nothing to one
        from cloudseed.provider.server.routes import CLOUD_APIS

        assert not os.path.exists(server), f"{server} exists: clouds/{name}.py should say served=True"
        assert name not in CLOUD_APIS
        return
    assert module in _imports(server), f"{server} does not import {module}"
    version = cloud.versions[0] if cloud.versions else ""
    for role, request in cloud.requests.items():  # every request is under the base path or a path family
        assert request.target(version).startswith((cloud.base_path(), *cloud.prefixes)), f"{name} {role}"



def test_the_server_apis_folder_holds_one_api_per_declared_cloud():
    """provider/server/apis/ is a plugin folder: a file per served cloud, named as the cloud, and
    ``_name.py`` helpers; anything else there would be a cloud nobody declared (or declared unserved)."""
    folder = os.path.join(PACKAGE, "provider", "server", "apis")
    apis = {name[:-3] for name in os.listdir(folder) if name.endswith(".py") and not name.startswith("_")}
    assert apis == set(SERVED)


def _spelled(cloud: Cloud) -> set[str]:
    """What only the contract may spell: its header names and its paths (versionless). Addresses are
    shared by several clouds (169.254.169.254), so they are checked in the cloud's datasource only."""
    words = {cloud.base} if "{" not in cloud.base and cloud.base != "/" else set()
    for request in cloud.requests.values():
        # a header named by one plain word (Azure's "Metadata") is too common a word to police
        words.update(header for header, _ in (*request.sends, *request.answers)
                     if header not in HTTP_HEADERS and any(c in header for c in "-_"))
        words.update(value for header, value in request.sends if header == "Authorization" and value)
        if "{" not in request.path and request.path.startswith("/") and request.path != "/":  # not a key's name
            words.add(request.path)
    words.update(value for key, value in cloud.names.items() if key in ("token", "ttl", "flavor", "prefix"))
    return words


def _strings(path: str) -> list[tuple[int, str]]:
    """String constants of the file (f-string parts too), docstrings left out."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_nothing_else_in_the_package_spells_a_contract():
    """A header name or a path of a contract written again in agent/ or provider/ (any case), or an
    address or version of it in its datasource, is a second copy that can drift from the first."""
    words = {}
    for cloud in CLOUDS.values():
        for word in _spelled(cloud):
            words[word.lower()] = cloud.name
    copies = []
    for part in ("agent", "provider"):
        for top, _dirs, files in os.walk(os.path.join(PACKAGE, part)):
            for file in files:
                if file.endswith(".py"):
                    path = os.path.join(top, file)
                    for line, value in _strings(path):
                        if value.lower() in words:
                            copies.append(f"{os.path.relpath(path, PACKAGE)}:{line}: {value!r} "
                                          f"(clouds/{words[value.lower()]}.py)")
    for cloud in CLOUDS.values():
        path = os.path.join(PACKAGE, "agent", "datasources", f"{cloud.datasource.lower()}.py")
        copies += [f"{os.path.relpath(path, PACKAGE)}:{line}: {value!r} (clouds/{cloud.name}.py's address or version)"
                   for line, value in _strings(path)
                   if any(value.startswith(a) for a in cloud.addresses) or value in cloud.versions]
    assert not copies, "contract strings written a second time:\n" + "\n".join(copies)


@pytest.mark.parametrize("name", sorted(CLOUDS))
def test_a_datasource_imports_only_its_own_cloud(name):
    """The boot imports the contract of the cloud it runs on and no other."""
    import subprocess

    module = f"cloudseed.agent.datasources.{CLOUDS[name].datasource.lower()}"
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.startswith('cloudseed.clouds.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == repr([f"cloudseed.clouds.{name}"])


@pytest.mark.parametrize("name", sorted(SERVED))
def test_the_server_routes_every_request_of_a_cloud_to_its_api(name):
    from cloudseed.provider.server.routes import TOKEN, api_for

    cloud = CLOUDS[name]
    settings = {name: {}}
    for role, request in cloud.requests.items():
        target = request.target(cloud.versions[0] if cloud.versions else "")
        path, _, query = target.partition("?")
        expected = TOKEN if (name, role) == ("ec2", "token") else name
        assert api_for(path, settings, query) == expected, f"{name} {role}: {target}"


# clouds whose datasource and server document still spell their fields themselves (no ``fields`` in
# their contract yet): none now; a cloud the server comes to answer declares its fields with it
FIELDS_NOT_YET_DECLARED: set[str] = set()


# datasources that keep what they read under cloud-init's names, several of which are the wire's words
# too (SmartOS's "user-script", "hostname", "user-data"; OVF's properties are cloud-init's metadata
# keys; NoCloud's meta-data is cloud-init's own seed format, its keys cloud-init's metadata keys, kept
# as they are): their literal reads are cloud-init's keys
KEYED_BY_CLOUD_INIT_NAMES = {"smartos", "ovf", "nocloud"}

# the datasource's helper files that read its cloud's documents too (reading shared with another
# datasource: the config drive's OpenStack tree, the EC2-shaped crawler)
ALSO_READ_IN = {"openstack": ("_openstack_common.py",), "aliyun": ("ec2.py",), "cloudstack": ("ec2.py",),
                "exoscale": ("cloudstack.py", "ec2.py")}


def _the_contracts(node: ast.expr) -> bool:
    """The contract's own mapping (``F["role"]``, ``FIELDS[...]``, ``CLOUD.fields[...]``): the role's use."""
    return (isinstance(node, ast.Name) and node.id in ("F", "FIELDS")) or (
        isinstance(node, ast.Attribute) and node.attr == "fields")


def _key_uses(path: str, reading: bool) -> list[tuple[int, str]]:
    """String constants used as keys: read (``.get("k")``, ``x["k"]``, ``"k" in x``, ``k == "k"``) or, with
    ``reading`` False, written (``{"k": ...}``, ``x["k"] = ...``, ``.setdefault("k", ...)``)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())

    def text(node) -> str | None:
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

    found = []
    for node in ast.walk(tree):
        keys: list = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in (("get", "pop") if reading else ("setdefault",)):
                keys = [node.args[0]]
        elif isinstance(node, ast.Subscript) and not _the_contracts(node.value):
            if isinstance(node.ctx, ast.Load) == reading:
                keys = [node.slice]
        elif reading and isinstance(node, ast.Compare):  # "k" in x, k == "k"
            keys = [node.left, *node.comparators]
        elif not reading and isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
        found += [(node.lineno, text(k)) for k in keys if text(k) is not None]
    return found


def test_the_clouds_without_declared_fields_are_the_known_ones():
    assert {name for name, cloud in SERVED.items() if not cloud.fields} == FIELDS_NOT_YET_DECLARED


@pytest.mark.parametrize("name", sorted(name for name, cloud in CLOUDS.items() if cloud.fields))
def test_field_names_are_read_and_written_from_the_contract(name):
    """The datasource reads the document's fields by the contract's names and the server's document
    is written with them: a field name spelled on one side only would go unnoticed until a guest
    read an answer without it."""
    cloud = CLOUDS[name]
    fields = set(cloud.fields.values())
    for role, request in cloud.requests.items():
        parts = {part for field in request.fields for part in field.split(".")}  # dotted: nested
        assert parts <= fields or request.form == "listing", f"{name} {role}: {sorted(parts - fields)}"
    folder = os.path.join(PACKAGE, "agent", "datasources")
    readers = [os.path.join(folder, f"{cloud.datasource.lower()}.py"),
               *(os.path.join(folder, helper) for helper in ALSO_READ_IN.get(name, ()))]
    writers = [os.path.join(PACKAGE, "provider", "instance_data", f"{name}.py"),
               os.path.join(PACKAGE, "provider", "server", "apis", f"{name}.py")]
    copies = [f"{os.path.relpath(reader, PACKAGE)}:{line}: reads {key!r}"
              for reader in readers for line, key in _key_uses(reader, reading=True) if key in fields
              and name not in KEYED_BY_CLOUD_INIT_NAMES]
    # a cloud whose paths spell its names in another form than its documents (GCE's tree) declares
    # them as PATH_NAMES: the server writes those too
    from importlib import import_module

    written = fields | set(getattr(import_module(f"cloudseed.clouds.{name}"), "PATH_NAMES", {}).values())
    for path in (p for p in writers if os.path.exists(p)):
        copies += [f"{os.path.relpath(path, PACKAGE)}:{line}: writes {key!r}"
                   for line, key in _key_uses(path, reading=False) if key in written]
    assert not copies, f"clouds/{name}.py's field names spelled again:\n" + "\n".join(copies)


@pytest.mark.parametrize(("path", "json"), [("id", "id"), ("network-interfaces", "networkInterfaces"),
                                            ("numeric-project-id", "numericProjectId"),
                                            ("service-accounts", "serviceAccounts")])
def test_gce_names_its_json_fields_from_its_path_names_by_one_rule(path, json):
    """GCE's tree is kebab-case in paths and camelCase in ``?recursive=true`` answers: the contract
    declares the path names and derives the JSON ones, and the server converts its tree by that rule."""
    from cloudseed.clouds import gce
    from cloudseed.provider.instance_data.gce import as_json

    assert gce.json_name(path) == json
    assert as_json({path: {"user-named-key": 1}}) == {json: {"user-named-key" if path in gce.KEPT_NAMES
                                                             else "userNamedKey": 1}}
    assert all(gce.FIELDS[role] == gce.json_name(name) for role, name in gce.PATH_NAMES.items())


def test_azure_wire_server_documents_carry_the_elements_the_other_side_finds():
    """The goal state the server writes has every element path the guest finds in it, and the
    health report the guest posts every one the server finds (``clouds/azure.py``), with the values
    given: an element renamed or moved on one side fails here."""
    import xml.etree.ElementTree as ET

    from cloudseed.agent.datasources._azure_wireserver import _goal_state, health_report
    from cloudseed.clouds.azure import GOAL_STATE, HEALTH_REPORT
    from cloudseed.provider.instance_data import azure
    from cloudseed.provider.registry import InstanceRecord
    from cloudseed.provider.server.apis._azure_wireserver import parse_report

    record = InstanceRecord(instance_id="i-wire", hostname="wire-vm")
    served = azure.goal_state(record, incarnation=7).encode()
    root = ET.fromstring(served)
    assert all(root.findtext("./" + path) for path in GOAL_STATE.values()), served
    incarnation, container, instance = _goal_state(served)
    assert (incarnation, container, instance) == ("7", azure.container_id(record), azure.role_instance_id(record))
    posted = health_report(incarnation, container, instance, "NotReady", "Provisioning", "disk <full>")
    report = parse_report(posted)
    assert report == {"incarnation": "7", "container": container, "instance": instance, "state": "NotReady",
                      "substatus": "Provisioning", "description": "disk <full>"}, report
    root = ET.fromstring(posted)
    assert root.tag == HEALTH_REPORT["root"]
    assert all(root.findtext("./" + path) for role, path in HEALTH_REPORT.items() if role != "root"), posted


def test_azure_ovf_env_the_server_writes_is_read_by_the_guest_by_the_contracts_names():
    """The provisioning disc's ``ovf-env.xml`` the server's seed writes, read with the names of
    ``clouds/azure.py``'s ``OVF``, gives the guest the record's user, host name, keys and custom data."""
    import xml.etree.ElementTree as ET

    from cloudseed.agent.datasources._azure_ovf import parse
    from cloudseed.clouds.azure import OVF, OVF_NAMESPACES
    from cloudseed.provider.instance_data import azure
    from cloudseed.provider.registry import InstanceRecord

    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOvfContractKey guest@example"
    record = InstanceRecord(instance_id="i-ovf", hostname="ovf-vm.example", user_data=b"#cloud-config\n{}\n",
                            ssh_keys=[{"name": "guest", "data": key}])
    written = azure.ovf_env(record)
    env = parse(written)
    assert (env.username, env.hostname, env.key_values, env.custom_data) == (
        azure.admin_username(record), "ovf-vm", [key], b"#cloud-config\n{}\n")
    section = ET.fromstring(written).find(OVF["linux_set"], OVF_NAMESPACES)
    assert section is not None
    for role in ("username", "hostname", "disable_password_auth", "public_keys", "custom_data"):
        assert section.find(OVF[role], OVF_NAMESPACES) is not None, role
