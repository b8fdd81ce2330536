"""Google Compute Engine's metadata server as its guest reads it: ``/computeMetadata/v1/``, every request
and answer carrying ``Metadata-Flavor: Google``, directories read whole with ``?recursive=true``.

Read by ``agent/datasources/gce.py``, served by ``provider/server/apis/gce.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

PREFIX = "/computeMetadata"
FLAVOR = ("Metadata-Flavor", "Google")

# the tree's names the guest reads or the server must write, by role, as the paths spell them
# (``/instance/network-interfaces/0/mac``); a ``?recursive=true`` answer spells them ``json_name(...)``
PATH_NAMES = {"instance_id": "id", "zone": "zone", "hostname": "hostname",
              "attributes": "attributes", "network_interfaces": "network-interfaces", "mac": "mac", "mtu": "mtu",
              "service_accounts": "service-accounts", "project_id": "project-id",
              "numeric_project_id": "numeric-project-id", "machine_type": "machine-type"}
# directories whose entries are named by the user (metadata attributes) or by account: their names
# are kept as written in both forms
KEPT_NAMES = (PATH_NAMES["attributes"], PATH_NAMES["service_accounts"])
# attribute names (instance or project metadata) the guest reads and the server sets: as written
ATTRIBUTES = {"user_data": "user-data", "user_data_encoding": "user-data-encoding", "ssh_keys": "ssh-keys",
              "ssh_keys_legacy": "sshKeys", "block_project_keys": "block-project-ssh-keys"}


def json_name(name: str) -> str:
    """A path name as a ``?recursive=true`` answer spells it: lowerCamelCase at the hyphens
    (``network-interfaces`` -> ``networkInterfaces``); a name without a hyphen is unchanged."""
    head, *rest = name.split("-")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


# the JSON documents' fields, by role: the tree's names by the rule, the attributes' as written
FIELDS = {**{role: json_name(name) for role, name in PATH_NAMES.items()}, **ATTRIBUTES}

CLOUD = Cloud(
    "gce", datasource="GCE",
    addresses=("http://169.254.169.254",),
    base=PREFIX + "/{version}/",
    prefixes=(PREFIX,),
    versions=("v1",),
    names={"prefix": PREFIX, "flavor": FLAVOR[0], "flavor_value": FLAVOR[1]},
    fields=FIELDS,
    requests={
        "instance": Request(PREFIX + "/{version}/instance/", query="recursive=true", sends=(FLAVOR,),
                            answers=(FLAVOR,), form="json",
                            fields=tuple(FIELDS[k] for k in ("instance_id", "zone", "hostname", "attributes",
                                                             "network_interfaces"))),
        "project": Request(PREFIX + "/{version}/project/attributes/", query="recursive=true", sends=(FLAVOR,),
                           answers=(FLAVOR,), form="json"),
        "user_data": Request(PREFIX + "/{version}/instance/attributes/" + ATTRIBUTES["user_data"], sends=(FLAVOR,),
                             answers=(FLAVOR,)),
    },
)
