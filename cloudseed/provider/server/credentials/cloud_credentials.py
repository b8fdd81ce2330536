"""What the credential paths of GCE, Azure and OCI need, made when first asked, once per server process.

The keys live in the registry's settings (shared by every server of the registry): the credential
signing key (``credential_keys.py``), the HMAC key of GCE access tokens (``gce_token_key``), the
key of Azure's attested documents (``azure_attested.py``: its own ECDSA key, or EC2's RSA one) and
OCI's instance-principal CA (``oci_identity.py``). ``cryptography`` is loaded with the first of them, so a server whose
instances never ask for credentials never loads it.
"""

from __future__ import annotations

import os
from typing import Any


class CloudCredentials:
    def __init__(self, registry: Any, lifetime: int = 3600, attested_key: str = "ecdsa"):
        self.registry = registry
        self.lifetime = lifetime  # access_token_seconds
        self.attested_key = attested_key  # azure_attested_key: ecdsa or rsa
        self._key: Any = None
        self._gce: Any = None
        self._azure: Any = None
        self._oci: Any = None
        self._attested: Any = None

    @property
    def key(self) -> Any:
        """The registry's ``CredentialKey`` (JWT signing, published keys)."""
        if self._key is None:
            from cloudseed.provider.server.credentials.credential_keys import shared_key

            self._key = shared_key(self.registry)
        return self._key

    @property
    def gce(self) -> Any:
        if self._gce is None:
            from cloudseed.provider.server.credentials.gce_credentials import GceCredentials

            secret = self.registry.shared_setting("gce_token_key", lambda: os.urandom(32).hex())
            self._gce = GceCredentials(bytes.fromhex(secret), self.lifetime)
        return self._gce

    @property
    def azure(self) -> Any:
        if self._azure is None:
            from cloudseed.provider.server.credentials.azure_identity import AzureTokens

            self._azure = AzureTokens(self.key, self.lifetime)
        return self._azure

    @property
    def attested(self) -> Any:
        """Azure's attested documents (``AttestedAnswers``): signed with the key ``attested_key`` names."""
        if self._attested is None:
            from cloudseed.provider.server.credentials.azure_attested import AttestedAnswers, AttestedSigner, shared_pem

            self._attested = AttestedAnswers(AttestedSigner(shared_pem(self.registry, self.attested_key)))
        return self._attested

    @property
    def oci(self) -> Any:
        if self._oci is None:
            from cloudseed.provider.server.credentials.oci_identity import OciIdentity

            self._oci = OciIdentity(self.registry, self.key)
        return self._oci
