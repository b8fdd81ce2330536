"""The OpenAPI 3 description of the admin API, served at ``/openapi.json`` on the admin listener."""

from __future__ import annotations

from typing import Any

from cloudseed.provider.registry import LIST_FILTERS
from cloudseed.provider.registry.ec2_fields import FIELDS as EC2_FIELDS
from cloudseed.provider.registry.events import DETAILS as EVENT_DETAILS
from cloudseed.provider.registry.events import KINDS as EVENT_KINDS
from cloudseed.provider.registry.provisioning import STATES as PROVISIONING_STATES


def _instance_schema() -> dict[str, Any]:
    string = {"type": "string"}
    return {
        "type": "object", "required": ["instance_id"], "additionalProperties": False,
        "properties": {
            "instance_id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"},
            "name": string, "hostname": string, "availability_zone": string, "project_id": string,
            "addresses": {"type": "array", "items": {
                "type": "object", "required": ["address"], "additionalProperties": False,
                "properties": {"address": string, "network": string, "mac": string,
                               "prefix": {"type": "integer"}, "public": {"type": "boolean"}}}},
            "macs": {"type": "array", "items": string},
            "ssh_keys": {"type": "array", "items": {
                "type": "object", "required": ["data"],
                "properties": {"name": string, "type": string, "data": string}}},
            "user_data": {"type": ["string", "null"], "maxLength": 65536},
            "user_data_b64": {"type": ["string", "null"], "description": "user-data as base64 (binary)"},
            "vendor_data": {}, "vendor_data2": {},
            "network_data": {"type": ["object", "null"], "description": "OpenStack network_data.json"},
            "gateway": {"type": ["array", "null"], "items": string, "maxItems": 2,
                        "description": "default gateways of derived network documents, one per family "
                                       "(null: derived; []: none)"},
            "nameservers": {"type": ["array", "null"], "items": string, "maxItems": 8,
                            "description": "DNS servers of derived network documents (null: the gateway)"},
            "meta": {"type": "object"}, "tags": {"type": "object", "additionalProperties": string},
            "imds_tokens": {"enum": ["required", "optional"]},
            "launch_index": {"type": "integer", "minimum": 0}, "instance_type": string, "ami_id": string,
            "created_at": string,
            "ec2": {"type": "object", "additionalProperties": False, "description": "EC2-only settings",
                    "properties": {key: {"description": text} for key, text in EC2_FIELDS.items()}},
            "clouds": {"type": "object", "description": "per-cloud settings (gce, digitalocean, hetzner, oracle, "
                       "azure...): keys in cloudseed/provider/registry/cloud_fields.py"},
            "password_set": {"type": "boolean", "readOnly": True},
            "password_by": {"enum": ["operator", "guest", ""], "readOnly": True,
                            "description": "who set the password: the operator, or the guest (OpenStack API)"},
        },
    }


def _event_schema() -> dict[str, Any]:
    time_value = {"oneOf": [{"type": "string", "description": "2026-11-24T21:00:00Z, or +SECONDS from now"},
                            {"type": "number", "description": "epoch seconds"}]}
    return {"type": "object", "additionalProperties": False, "properties": {
        "kind": {"enum": list(EVENT_KINDS)}, "not_before": time_value, "not_after": time_value,
        "duration_seconds": {"type": "number", "exclusiveMinimum": 0}, "event_id": {"type": "string"},
        "state": {"enum": ["scheduled", "canceled", "completed"]},
        "details": {"type": "object", "description": "per kind: " + "; ".join(
            f"{kind}: {', '.join(spec) or '-'}" for kind, spec in EVENT_DETAILS.items())}}}


def openapi_document() -> dict[str, Any]:
    error_schema = {"schema": {"$ref": "#/components/schemas/Error"}}
    error = {"description": "error", "content": {"application/json": error_schema}}
    instance = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Instance"}}}}
    id_param = {"name": "instance_id", "in": "path", "required": True, "schema": {"type": "string"}}
    event = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Event"}}}}
    def counter(name: str, text: str) -> list[dict[str, Any]]:
        return [{"name": name, "in": "query", "description": text,
                 "schema": {"type": "integer", "minimum": 0, "maximum": 10 ** 15 - 1}}]

    filters = [{"name": name, "in": "query", "schema": {"type": "string"}} for name in LIST_FILTERS]
    for entry in filters:
        if entry["name"] == "tag":
            entry["description"] = "a tag key, or KEY=VALUE"
    filters += [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 1000}},
                {"name": "offset", "in": "query",
                 "schema": {"type": "integer", "minimum": 0, "maximum": 10 ** 15 - 1}}]
    return {
        "openapi": "3.0.3",
        "info": {"title": "cloudseed metadata server admin API", "version": "1"},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Instance": _instance_schema(), "Event": _event_schema(),
                        "Error": {"type": "object", "properties": {"error": {"type": "string"},
                                                                    "field": {"type": "string"}}}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/instances": {
                "get": {"summary": "List instances", "parameters": filters,
                        "responses": {"200": {"description": "instances"}, "400": error, "401": error}},
                "post": {"summary": "Register an instance", "requestBody": instance,
                         "responses": {"201": instance | {"description": "created"}, "400": error, "401": error,
                                       "409": error, "413": error}},
            },
            "/v1/instances/{instance_id}": {
                "parameters": [id_param],
                "get": {"summary": "Show an instance", "responses": {"200": instance | {"description": "ok"},
                                                                      "404": error}},
                "patch": {"summary": "Change some fields", "requestBody": instance,
                          "responses": {"200": instance | {"description": "ok"}, "400": error, "404": error,
                                        "409": error}},
                "delete": {"summary": "Remove an instance", "responses": {"204": {"description": "gone"},
                                                                           "404": error}},
            },
            "/v1/instances/{instance_id}/password": {
                "parameters": [id_param],
                "delete": {"summary": "Clear the guest-set password",
                           "responses": {"204": {"description": "cleared"}, "404": error}},
            },
            "/v1/instances/{instance_id}/phone-home": {
                "parameters": [id_param],
                "get": {"summary": "phone_home posts received", "responses": {"200": {"description": "posts"},
                                                                               "404": error}},
            },
            "/v1/instances/{instance_id}/events": {
                "parameters": [id_param],
                "get": {"summary": "The instance's timeline (registry/events.py), each event with its phase now",
                        "responses": {"200": {"description": "events"}, "404": error}},
                "post": {"summary": "Schedule an event", "requestBody": event,
                         "responses": {"201": {"description": "scheduled"}, "400": error, "404": error,
                                       "409": error}},
            },
            "/v1/instances/{instance_id}/events/{event_id}": {
                "parameters": [id_param, {"name": "event_id", "in": "path", "required": True,
                                          "schema": {"type": "string"}}],
                "get": {"summary": "Show an event", "responses": {"200": {"description": "ok"}, "404": error}},
                "patch": {"summary": "Change state, times or details", "requestBody": event,
                          "responses": {"200": {"description": "ok"}, "400": error, "404": error}},
                "delete": {"summary": "Remove an event", "responses": {"204": {"description": "gone"},
                                                                        "404": error}},
            },
            "/v1/provisioning": {"get": {
                "summary": "Every instance's provisioning state (admin_provisioning.py)",
                "parameters": [{"name": "state", "in": "query", "schema": {"enum": list(PROVISIONING_STATES)}},
                               {"name": "q", "in": "query", "schema": {"type": "string"},
                                "description": "part of an instance id, name or host name"},
                               *counter("limit", "at most 1,000"), *counter("offset", "")],
                "responses": {"200": {"description": "instances and their states"}, "400": error, "401": error}}},
            "/v1/instances/{instance_id}/provisioning": {"parameters": [id_param], "get": {
                "summary": "An instance's provisioning state and the reports of one boot",
                "parameters": [*counter("boot", "the boot to show (default: the latest)"),
                               *counter("after", "reports after this sequence number")],
                "responses": {"200": {"description": "state and reports"}, "400": error, "404": error}}},
            "/v1/instances/{instance_id}/provisioning/stream": {"parameters": [id_param], "get": {
                "summary": "Reports as Server-Sent Events: those after `after` (or Last-Event-ID) once there are "
                           "any, else the state after `wait` seconds; the client reconnects",
                "parameters": [*counter("after", "reports after this sequence number"),
                               {"name": "wait", "in": "query", "example": 0,
                                "schema": {"type": "integer", "minimum": 0, "maximum": 30}}],
                "responses": {"200": {"description": "text/event-stream: report and state events"},
                              "400": error, "404": error}}},
            "/v1/keys/jwks": {"get": {
                "security": [], "summary": "The public keys of the tokens the server issues, as a JWK Set",
                "responses": {"200": {"description": "JWK Set", "content": {"application/json": {"schema": {
                    "type": "object", "required": ["keys"], "properties": {"keys": {"type": "array"}}}}}}}}},
            "/v1/keys/certs": {"get": {
                "security": [], "summary": "The same keys as {kid: certificate PEM} (Google's oauth2/v1/certs form)",
                "responses": {"200": {"description": "certificates by key id", "content": {"application/json": {
                    "schema": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}},
            "/v1/keys/pem": {"get": {
                "security": [], "summary": "The signing certificate as PEM",
                "responses": {"200": {"description": "certificate", "content": {"application/x-pem-file": {
                    "schema": {"type": "string"}}}}}}},
            "/v1/credentials/gce/tokeninfo": {"get": {
                "security": [], "summary": "What a GCE access token grants, as Google's tokeninfo answers",
                "parameters": [{"name": "access_token", "in": "query", "required": True,
                                "schema": {"type": "string"}}],
                "responses": {"200": {"description": "email, scope, expires_in, instance_id"},
                              "400": {"description": "invalid_token: expired, or not this registry's"}}}},
            "/health": {"get": {"security": [], "summary": "Liveness and registry reachability",
                                "responses": {"200": {"description": "ok"}, "503": error}}},
            "/metrics": {"get": {"security": [], "summary": "Prometheus metrics",
                                 "responses": {"200": {"description": "text exposition format"}}}},
        },
    }
