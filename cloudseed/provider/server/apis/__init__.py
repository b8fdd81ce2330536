"""The metadata APIs, one file per cloud: ``apis/<name>.py`` for the cloud ``cloudseed/clouds/<name>.py``
declares (EC2 served: ``ec2.py``), loaded by that name by ``MetadataApp`` (``routes.CLOUD_APIS``).

Each takes its paths, headers and field names from its cloud's contract and its documents from
``provider/instance_data/<name>.py``, and answers ``handle(app, request, instance)``; EC2's,
OpenStack's and NoCloud's are rendered for ``MetadataApp``, which answers their paths itself.
Files named ``_<name>.py`` are not APIs but helpers of one or a few of them (EC2's and Azure's
event documents, Azure's wire server, the JSON tree several APIs serve).
"""
