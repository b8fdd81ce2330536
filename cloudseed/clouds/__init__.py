"""Each cloud's wire contract, declared once: one file per cloud, read by the guest and the server alike.

A file ``clouds/<name>.py`` sets ``CLOUD = Cloud(...)``: the cloud's base addresses, the requests
its guest makes (method, path, the headers it sends, the headers and fields the answer carries),
the API versions the guest understands and the names of the headers both sides use. The agent's
datasource (``agent/datasources/<datasource>.py``) imports only its own cloud's file, and the
metadata server's API (``provider/server/apis/<name>.py``) the same file, so a path, header or
version is written in one place; ``tests/clouds/test_served_as_read.py`` asks a real
``cloudseed serve`` every request of every cloud as its guest makes it. The field names in the
answers are declared here too (``fields``), so the datasource reads and the server writes the same.

A datasource whose platform the server does not answer yet declares its contract here all the same
(``served=False``: where its guest looks, the requests or files it reads, the names in them), so
that adding its server is one file, ``provider/server/apis/<name>.py``, and the contract's
``served=True``.

This layer sits below agent and provider and imports nothing of cloudseed; at import it costs a
class definition (no dataclasses or typing on the boot path). ``declared()`` (tests, tools and the
server's tables) imports every file and refuses two declarations of one name.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


class Request:
    """One request the guest makes. ``path`` may hold ``{version}`` (the newest of the cloud's
    ``versions`` the service lists); ``sends`` are the headers the guest sends, a value of None
    meaning the session token the cloud's ``token`` request gave; ``answers`` the headers the
    answer carries (None: any value); ``fields`` the keys the guest reads from the answer (a JSON
    object, dotted for nested keys, or, for ``form="listing"``, entries of the listing). ``form``:
    ``text``, ``json``, ``yaml``, ``listing`` (one entry a line) or ``base64`` (text to decode).
    ``privileged_port``: asked from a source port below 1024 (root on the guest), else refused.
    ``signed="oauth"``: an ``Authorization`` header signs the request (OAuth 1.0 PLAINTEXT with the
    instance's keys, ``core/oauth.py``)."""

    __slots__ = ("method", "path", "query", "sends", "answers", "fields", "form", "privileged_port", "signed")

    def __init__(self, path: str, *, method: str = "GET", query: str = "",
                 sends: tuple[tuple[str, Optional[str]], ...] = (),
                 answers: tuple[tuple[str, Optional[str]], ...] = (),
                 fields: tuple[str, ...] = (), form: str = "text", privileged_port: bool = False,
                 signed: str = ""):
        self.method = method
        self.path = path
        self.query = query
        self.sends = sends
        self.answers = answers
        self.fields = fields
        self.form = form
        self.privileged_port = privileged_port
        self.signed = signed

    def target(self, version: str = "") -> str:
        """The request target: path and query, ``{version}`` filled in."""
        target = f"{self.path}?{self.query}" if self.query else self.path
        return target.replace("{version}", version) if version else target

    def headers(self, token: str = "") -> dict[str, str]:
        """The headers to send, the session token where the contract says so."""
        return {name: token if value is None else value for name, value in self.sends}


class Cloud:
    """One cloud's wire contract (see the file's docstring); ``requests`` are keyed by role
    (``token``, ``meta_data``, ``user_data``...); ``names`` are header and field names both sides
    use outside a single request (a token header, a TTL header...); ``fields`` the names of the
    fields in the answers' documents, by role (``{"instance_id": "droplet_id", ...}``, nested ones
    too): the datasource reads them and the server's document writes them from here, and a
    request's ``fields`` (what the server must always answer) are taken from them."""

    __slots__ = ("name", "datasource", "addresses", "base", "versions", "requests", "names", "prefixes", "fields",
                 "served")

    def __init__(self, name: str, *, datasource: str, addresses: tuple[str, ...],
                 requests: dict[str, Request], base: str = "/", versions: tuple[str, ...] = (),
                 names: Optional[dict[str, str]] = None, prefixes: tuple[str, ...] = (),
                 fields: Optional[dict[str, str]] = None, served: bool = True):
        self.name = name
        self.datasource = datasource
        self.addresses = addresses  # base URLs, tried side by side or in order (the datasource says)
        self.base = base  # the path every request starts with (may hold {version}): a guest's metadata URL
        self.versions = versions  # API versions the guest understands, newest first
        self.requests = requests
        self.names = names or {}
        self.prefixes = prefixes or (base,)  # the path families the server routes to this cloud's API
        self.fields = fields or {}
        # False: no server answers it yet (its guest's side only); its API would be
        # provider/server/apis/<name>.py, and the contract then says True
        self.served = served

    def base_path(self, version: str = "") -> str:
        return self.base.replace("{version}", version or (self.versions[0] if self.versions else ""))

    def default_url(self, version: str = "") -> str:
        """The first address with the base path: where the guest looks when not told otherwise."""
        return self.addresses[0] + self.base_path(version)

    def tail(self, role: str, version: str = "") -> str:
        """The ``role`` request's target after the base path (for a guest given another metadata URL)."""
        version = version or (self.versions[0] if self.versions else "")
        target = self.requests[role].target(version)
        base = self.base_path(version)
        if not target.startswith(base):
            raise ValueError(f"clouds/{self.name}.py: request {role!r} ({target}) is not under the base {base}")
        return target[len(base):]

    def __repr__(self) -> str:
        return f"Cloud({self.name!r}, datasource={self.datasource!r})"


class DuplicateCloud(ValueError):
    """Two files declare one cloud (or one datasource)."""


def served() -> dict[str, Cloud]:
    """The declared clouds the metadata server answers."""
    return {name: cloud for name, cloud in declared().items() if cloud.served}


def declared(directory: str = "", package: str = __name__) -> dict[str, Cloud]:
    """Every cloud declared under ``directory`` (this package's by default), by name; a file without
    ``CLOUD``, a ``CLOUD`` that is not a ``Cloud``, or two files declaring one name or one
    datasource raise an error naming the files."""
    import importlib
    import os

    directory = directory or os.path.dirname(os.path.abspath(__file__))
    found: dict[str, Cloud] = {}
    where: dict[str, str] = {}
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(".py") or entry.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{entry[:-3]}")
        cloud = getattr(module, "CLOUD", None)
        path = os.path.join(directory, entry)
        if not isinstance(cloud, Cloud):
            raise TypeError(f"{path}: CLOUD must be a cloudseed.clouds.Cloud, got {type(cloud).__name__}")
        for key in (f"cloud {cloud.name!r}", f"datasource {cloud.datasource!r}"):
            if key in where:
                raise DuplicateCloud(f"{path}: {key} is already declared in {where[key]}")
            where[key] = path
        found[cloud.name] = cloud
    return found
