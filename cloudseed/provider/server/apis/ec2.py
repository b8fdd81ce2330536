"""The EC2 instance metadata API: ``/<version>/meta-data/...`` trees, user-data, the signed identity.

Directory paths list their entries one per line (sub-directories end in ``/``); ``public-keys/``
lists ``0=name`` and ``0/openssh-key`` holds the key, as cloud-init's crawler expects. The tree
itself (which key from which version) is ``provider/instance_data/ec2.py``, shared with the
config drive's ``ec2/`` files; this file adds the live leaves: temporary credentials
(``ec2_credentials.py``, a new set per rotation window) and the identity signatures
(``ec2_identity.py``, signed once per instance, in process). A live leaf is a function giving
the answer, which the server keeps like any rendered answer (``MetadataApp._cached``).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional, Union

from cloudseed.clouds.ec2 import FIELDS as F
from cloudseed.provider.instance_data.ec2 import EC2_LATEST as LATEST
from cloudseed.provider.instance_data.ec2 import EC2_VERSIONS as VERSIONS
from cloudseed.provider.instance_data.ec2 import Tree, identity_document, meta_data_tree
from cloudseed.provider.registry import InstanceRecord
from cloudseed.provider.server.apis import _ec2_events as ec2_events
from cloudseed.provider.server.credentials.ec2_credentials import CredentialIssuer
from cloudseed.provider.server.credentials.ec2_identity import IdentitySigner, shared_pem
from cloudseed.provider.server.engine.http import Response, text_error

__all__ = ["LATEST", "VERSIONS", "Live", "meta_data_answers", "meta_data_tree", "render", "resolve_version",
           "versions_listing"]

Answer = Union[Response, Callable[[], Response]]
_NOT_FOUND = text_error(404, "not found")


class Live:
    """What the live leaves need, shared by every server of one registry: the credentials key
    and the identity signing key (both kept in the registry's settings, made on first use)."""

    def __init__(self, registry: Any):
        key = registry.shared_setting("ec2_credentials_key", lambda: os.urandom(32).hex())
        self.credentials = CredentialIssuer(bytes.fromhex(key))
        self._registry = registry
        self._signer: Optional[IdentitySigner] = None

    @property
    def signer(self) -> IdentitySigner:
        if self._signer is None:
            self._signer = IdentitySigner(shared_pem(self._registry))
        return self._signer


def versions_listing() -> Response:
    return Response(200, "\n".join((*VERSIONS, "latest")))


def resolve_version(version: str) -> Optional[str]:
    if version == "latest":
        return LATEST
    return version if version in VERSIONS else None


def render(record: InstanceRecord, version: str, subpath: str, configured_region: str = "",
           trees: Optional[dict] = None, live: Optional[Live] = None, timeline: tuple = ()) -> Optional[Answer]:
    """``/<version>/<subpath>`` for ``record``; None when there is no such path (404).

    ``trees``, when given, keeps the trees built for each version (a crawl asks for every leaf of
    one tree; the record must be the same for every call with the same dict). ``live`` adds the
    credentials and the identity signatures; without it they are not served. ``timeline``: the
    instance's events; paths they decide (``ec2_events.CATEGORIES`` and the ``meta-data/``
    listing) are then answered by a function of the time of each request."""
    resolved = resolve_version(version)
    if resolved is None:
        return None
    trees = trees if trees is not None else {}
    parts = [p for p in subpath.split("/") if p]
    if not parts:
        entries = ["dynamic", "meta-data"] if resolved >= "2009-04-04" else ["meta-data"]
        if record.user_data is not None:
            entries.append("user-data")
        return Response(200, "\n".join(entries))
    if parts == ["user-data"]:
        if record.user_data is None:
            return None
        return Response.shared(record.user_data, "application/octet-stream")
    tree: Any
    if parts[0] == "meta-data":
        tree = _meta_data(record, resolved, configured_region, trees, live)
    elif parts[0] == "dynamic" and resolved >= "2009-04-04":
        key = ("dynamic tree", resolved)
        tree = trees.get(key)
        if tree is None:
            tree = trees[key] = _dynamic_tree(record, configured_region, live, trees)
    else:
        return None
    if timeline and parts[0] == "meta-data" and (len(parts) == 1 or parts[1] in ec2_events.CATEGORIES):
        return _timed(record, tree, resolved, parts[1:], timeline)
    return _answer(record, tree, parts[1:])


def _timed(record: InstanceRecord, tree: Any, version: str, parts: list[str], timeline: tuple) -> Answer:
    def answer() -> Response:
        found = _answer(record, ec2_events.overlay(tree, record, timeline, version, time.time()), parts)
        if found is None:
            return _NOT_FOUND
        return found if isinstance(found, Response) else found()
    return answer


def meta_data_answers(record: InstanceRecord, version: str, prefix: str, configured_region: str = "",
                      trees: Optional[dict] = None, live: Optional[Live] = None) -> list[tuple[str, Answer]]:
    """Every path of the ``meta-data/`` tree of ``version`` (resolved) under ``prefix`` (how the
    request spells it: ``/latest/meta-data``) with the answer ``render`` gives for it, a directory
    with and without its slash, depth first in the tree's order. A crawler asks for nearly all of
    them, so the server makes them in one walk of the tree instead of one lookup per request (the
    paths the instance's timeline decides are the caller's to leave out)."""
    answers: list[tuple[str, Answer]] = []
    append = answers.append
    keys = f"{prefix}/{F['public_keys']}"
    # depth first with a stack, not a recursive closure: a closure that calls itself is a reference
    # cycle, and each instance's first crawl would leave one (with every answer) for the cyclic GC
    stack: list[tuple[str, Any]] = [
        (prefix, _meta_data(record, version, configured_region, trees if trees is not None else {}, live))]
    pop, extend = stack.pop, stack.extend
    while stack:
        path, node = pop()
        if isinstance(node, str):
            append((path, _text(node)))
        elif isinstance(node, dict):
            answer = _text(_listing(record, node, path == keys))
            append((path, answer))
            append((path + "/", answer))
            extend((f"{path}/{name}", child) for name, child in reversed(node.items()))
        else:
            append((path, _node(record, node, [])))
    return answers


def _meta_data(record: InstanceRecord, version: str, configured_region: str, trees: dict,
               live: Optional[Live]) -> Tree:
    """The meta-data tree of ``version``, built once per ``trees``."""
    key = ("meta-data tree", version)
    tree = trees.get(key)
    if tree is None:
        tree = trees[key] = meta_data_tree(record, version, configured_region, _live_leaf(record, live))
    return tree


def _answer(record: InstanceRecord, tree: Any, parts: list[str]) -> Optional[Answer]:
    for part in parts:
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return _node(record, tree, parts)


def _node(record: InstanceRecord, tree: Any, parts: list[str]) -> Answer:
    """The answer for the node ``tree`` at ``parts``: a leaf's text, a live leaf, a listing."""
    if isinstance(tree, str):
        return _text(tree)
    if callable(tree):
        return tree
    return _text(_listing(record, tree, parts == [F["public_keys"]]))


def _listing(record: InstanceRecord, tree: Tree, public_keys: bool) -> str:
    """A directory's answer: its entries one per line, sub-directories with their slash; the
    ``public-keys/`` directory lists ``0=name`` for each key."""
    if public_keys:
        return "\n".join(f"{i}={k['name']}" for i, k in enumerate(record.ssh_keys))
    return "\n".join(f"{k}/" if isinstance(v, dict) else k for k, v in tree.items())


_text = Response.shared  # most leaves and listings are the same for many instances


class _InstanceLeaves:
    """``LiveLeaves`` of one instance (``instance_data.ec2``)."""

    def __init__(self, issuer: CredentialIssuer, instance_id: str):
        self.issuer = issuer
        self.instance_id = instance_id

    def credentials(self, kind: str, name: str) -> Callable[[], Response]:
        return self.issuer.leaf(self.instance_id, kind, name)

    def info(self, doc: dict) -> Callable[[], Response]:
        return self.issuer.info_leaf(doc)


def _live_leaf(record: InstanceRecord, live: Optional[Live]) -> Optional[_InstanceLeaves]:
    return _InstanceLeaves(live.credentials, record.instance_id) if live is not None else None


def _dynamic_tree(record: InstanceRecord, configured_region: str, live: Optional[Live], trees: dict) -> Tree:
    document = identity_document(record, configured_region)
    identity: dict[str, Any] = {"document": document}
    if live is not None:
        signing = trees.get("identity signing")  # the same document in every version: signed once
        if signing is None:
            signing = trees["identity signing"] = _Signing(live, document)
        for name in (F["pkcs7"], F["signature"], F["rsa2048"]):
            identity[name] = signing.leaf(name)
    return {"instance-identity": identity}


class _Signing:
    """One instance's signatures: made once, on the first signed request (in process, about
    0.3 ms: on the event loop, cheaper than a hop to a thread), then answered from memory."""

    def __init__(self, live: Live, document: str):
        self.live = live
        self.document = document
        self.answers: dict[str, Response] = {}

    def leaf(self, name: str) -> Callable[[], Response]:
        def answer() -> Response:
            if not self.answers:
                signed = self.live.signer.sign(self.document)
                self.answers.update({k: Response(200, v) for k, v in signed.items()})
            return self.answers[name]
        return answer
