"""What an instance's data is, whoever publishes it: one derivation for the server and the seeds.

``cloudseed serve`` (``provider/server``) and ``cloudseed seed build`` (``provider/seeds``) both
turn an ``InstanceRecord`` into the same documents through these modules, so a config drive and
the metadata service never disagree about one instance: ``versions`` (which OpenStack version has
which file and key), ``network`` (NICs, addresses, ``network_data.json``, NoCloud network-config),
``openstack`` (``meta_data.json``, vendor data), ``ec2`` (the meta-data tree, the identity
document) and ``nocloud`` (``meta-data``, ``vendor-data``).
"""
