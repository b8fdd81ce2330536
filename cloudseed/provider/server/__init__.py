"""The metadata server (``cloudseed serve``): every cloud's metadata API for many instances, an
admin REST API, metrics and health. See docs/metadata-server.md.

Layout, by job:

- here, the metadata service itself: ``service`` (lifecycle: listeners, applications, workers),
  ``workers`` (several processes on one port), ``config`` (settings), ``metadata_app`` (who is
  asking, then which API answers), ``routes`` (which API a path belongs to), ``instance_cache``
  (the registry's hot-path view), ``imds_tokens``, ``rate_limit``, ``faults``, ``metrics``, and
  the routes every API shares: ``signature_api`` (``PATH.sig``), ``provisioning_api`` (an
  instance's own reports), ``password_server`` (CloudStack's password port);
- ``apis/``: one file per cloud (EC2 served: ``apis/ec2.py``), named as ``cloudseed/clouds/``
  declares it; ``_name.py`` files there are helpers of those APIs;
- ``credentials/``: signing keys, identity documents and the credentials the clouds hand out
  (EC2's role credentials and signed identity, GCE's tokens, Azure's attested data, OCI's
  instance principals), made when first asked;
- ``engine/``: HTTP/1.1 under the applications, knowing nothing of clouds: ``wire`` (parsing),
  ``connection`` (keep-alive, pipelining), ``transport`` (sockets, epoll), ``tls_listener``,
  ``proxy_protocol``, ``http`` (``Request``/``Response``), ``access_log``;
- ``admin/``: the operator's side on the admin listener: ``admin_app`` (REST API), its events and
  provisioning views, the fleet pages and their timeline drawing, ``openapi``.
"""
