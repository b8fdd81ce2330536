"""The metadata server (``cloudseed serve``): OpenStack, EC2 (IMDSv2) and NoCloud APIs for many
instances, an admin REST API, metrics and health. See docs/metadata-server.md.

Layout: ``http`` (HTTP/1.1 on asyncio protocols), ``metadata_app`` (identity and routing),
``openstack_api`` / ``ec2_api`` / ``nocloud_api`` (formats), ``instance_cache`` (hot-path cache
with registry change following), ``imds_tokens``, ``rate_limit``, ``admin_app`` / ``openapi``,
``metrics``, ``access_log``, ``config`` and ``service`` (lifecycle).
"""
