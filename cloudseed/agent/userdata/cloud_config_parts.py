"""Merging the cloud-config parts of one user-data blob into one configuration.

Each ``#cloud-config`` part is merged into what came before with its own ``merge_how`` (or
``merge_type``) key, else its ``Merge-Type`` / ``X-Merge-Type`` MIME header, else
``dict(replace)+list()+str()``. A ``#cloud-config-jsonp`` part is a JSON patch applied to the
configuration so far. A part that cannot be used is reported and left out; the others still merge.
"""

from __future__ import annotations

from cloudseed.agent.userdata.kept_yaml import InvalidYaml, KeptYaml, load_cloud_config_yaml
from cloudseed.agent.userdata.merging import (
    PART_DEFAULT,
    Merger,
    MergeSpecError,
    parse_merge_string,
    pop_merge_spec,
)

_JSONP_PREFIX = "#cloud-config-jsonp"
_MERGE_HEADERS = ("Merge-Type", "X-Merge-Type")


class CloudConfigMerge:
    """Accumulates cloud-config parts; ``config`` is None until a cloud-config part is seen."""

    def __init__(self, errors: list[str], kept: KeptYaml | None = None):
        self.config: dict | None = None
        self.sources: list[str] = []
        self.errors = errors
        self.kept = kept  # documents parsed at an earlier boot of this instance

    def add_yaml(self, text: str, name: str, label: str, headers: dict[str, str]) -> None:
        self._start()
        try:
            data = load_cloud_config_yaml(text, self.kept)
        except InvalidYaml as e:
            self.errors.append(f"{label}: invalid YAML, part ignored: {e}")
            return
        if data is None:
            return          # an empty cloud-config: nothing to merge
        if not isinstance(data, dict):
            self.errors.append(f"{label}: cloud-config must be a mapping at the top level, "
                               f"not a {type(data).__name__}; part ignored")
            return
        header = next((headers[h] for h in _MERGE_HEADERS if headers.get(h)), "")
        try:
            spec = pop_merge_spec(data) + parse_merge_string(header)
            merger = Merger(spec or parse_merge_string(PART_DEFAULT))
            self.config = merger.merge(self.config, data)
        except MergeSpecError as e:
            self.errors.append(f"{label}: {e}; part ignored")
            return
        except (TypeError, ValueError, KeyError) as e:
            self.errors.append(f"{label}: cannot merge with the merge types given ({e}); part ignored")
            return
        self.sources.append(name)

    def add_json_patch(self, text: str, name: str, label: str) -> None:
        from cloudseed.agent.userdata.json_patch import JsonPatchError, apply_patch, parse_patch

        self._start()
        text = text.lstrip()
        if text.startswith(_JSONP_PREFIX):
            text = text[len(_JSONP_PREFIX):]
        try:
            self.config = apply_patch(self.config, parse_patch(text))
        except JsonPatchError as e:
            self.errors.append(f"{label}: JSON patch not applied: {e}")
            return
        self.sources.append(name)

    def _start(self) -> None:
        if self.config is None or not self.sources:
            self.config = {}
