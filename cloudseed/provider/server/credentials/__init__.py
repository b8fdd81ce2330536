"""Credentials the metadata server hands out and signs, and the keys behind them.

``credential_keys`` (the registry's signing key and certificate, published by
``credential_keys_api`` on the admin listener), ``pkcs7_der`` (PKCS#7 signatures), and per cloud:
``ec2_credentials`` (role credentials), ``ec2_identity`` (the signed identity document),
``gce_credentials`` (access and identity tokens), ``azure_identity`` (managed identity tokens),
``azure_attested`` (attested data), ``oci_identity``, ``oci_federation`` and ``oci_auth_tls``
(OCI's instance principals). ``cloud_credentials`` makes them when first asked, once per server
process, so a server whose instances never ask for credentials never loads ``cryptography``.
"""
