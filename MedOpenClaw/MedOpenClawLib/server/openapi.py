"""The Result envelope's JSON schema (what MCP declares as every tool's ``outputSchema``) and the REST API's OpenAPI
3.1 document, generated from the actions a session offers, so the document and the catalog cannot disagree: every
action is a ``POST /v1/actions/{name}`` whose request body is the action's own JSON schema.

Pure data, no HTTP library: the headless server and the in-Slicer one serve the same document.
"""

from __future__ import annotations

from collections.abc import Iterable

from MedOpenClawLib import __version__

from ..core.toolset import ActionSpec

OPENAPI_VERSION = "3.1.0"
RESULT_SCHEMA = {
    "type": "object",
    "description": "The action's Result: ok, data, error {code, message}, rendered images (pixels are the image "
                   "content blocks, in this order) and artifacts written.",
    "properties": {
        "ok": {"type": "boolean"},
        "data": {"type": "object"},
        "error": {"anyOf": [{"type": "object", "properties": {"code": {"type": "string"},
                                                              "message": {"type": "string"}}},
                            {"type": "null"}]},
        "images": {"type": "array", "items": {"type": "object", "properties": {
            "view": {"type": "string"}, "width": {"type": "integer"}, "height": {"type": "integer"},
            "image_id": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}},
        "artifacts": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["ok", "data", "error", "images"],
}
# over REST an image carries its pixels inline (over MCP they are image content blocks)
REST_RESULT_SCHEMA = {**RESULT_SCHEMA, "properties": {**RESULT_SCHEMA["properties"], "images": {
    "type": "array", "items": {"type": "object", "properties": {
        **RESULT_SCHEMA["properties"]["images"]["items"]["properties"],
        "png_base64": {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png"}}}}}}
RESULT_REF = {"$ref": "#/components/schemas/Result"}
ERRORS = {  # status -> when a route answers it (always the Result shape, ok false)
    "400": "malformed request: bad JSON, a bad header value, an unknown format",
    "401": "missing or wrong bearer token",
    "403": "not a loopback client, or an actor other than 'agent'",
    "404": "no such route, action or session",
    "405": "method not allowed on this route",
    "408": "the request did not arrive within its deadline",
    "411": "a body sent without Content-Length",
    "413": "request body over 1 MiB",
    "431": "too many or too large request headers",
    "503": "too many sessions or connections",
}


def error_responses(*statuses: str) -> dict:
    return {status: {"$ref": f"#/components/responses/E{status}"} for status in statuses}


def json_response(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def action_operation(spec: ActionSpec) -> dict:
    """``POST /v1/actions/{spec.name}``: the action's schema in, the Result out (200 even when the action fails:
    ``ok`` false with the registry's error code)."""
    return {"post": {
        "operationId": spec.name,
        "summary": spec.description.split(". ")[0][:120],
        "description": spec.description,
        "tags": [spec.role],
        "x-tracks": list(spec.tracks),
        "parameters": [{"$ref": "#/components/parameters/Session"}],
        "requestBody": {"required": False, "content": {"application/json": {"schema": spec.parameters}}},
        "responses": {"200": json_response("the action's Result (ok false: the action refused or failed)",
                                           RESULT_REF),
                      **error_responses("400", "401", "403", "404", "408", "413", "431", "503")},
    }}


def document(actions: Iterable[ActionSpec], application: str, formats: Iterable[str], session_header: str) -> dict:
    """The OpenAPI document of the routes :class:`~.rest.RestService` serves, with one operation per action in
    ``actions`` (those the session offers on its track), ``formats`` the ``/v1/tools`` dialects and
    ``session_header`` the header naming a session of one's own."""
    session = [{"$ref": "#/components/parameters/Session"}]
    paths: dict = {
        "/v1/tools": {"get": {
            "operationId": "list_tools", "summary": "the actions offered on the session's track",
            "parameters": [*session, {"name": "format", "in": "query", "required": False,
                                      "schema": {"type": "string", "enum": sorted(formats)}}],
            "responses": {"200": json_response("tool definitions in the format's dialect",
                                               {"type": "array", "items": {"type": "object"}}),
                          **error_responses("400", "401", "404")}}},
        "/v1/state": {"get": {
            "operationId": "get_state", "summary": "the viewer-state snapshot", "parameters": session,
            "responses": {"200": json_response("viewer state", {"type": "object"}),
                          **error_responses("401", "404")}}},
        "/v1/trace": {"get": {
            "operationId": "get_trace", "summary": "the audit records so far", "parameters": session,
            "responses": {"200": json_response("audit records", {"type": "array", "items": {"type": "object"}}),
                          **error_responses("401", "404")}}},
        "/v1/openapi.json": {"get": {
            "operationId": "get_openapi", "summary": "this document",
            "responses": {"200": json_response("OpenAPI document", {"type": "object"}),
                          **error_responses("401")}}},
        "/v1/sessions": {"post": {
            "operationId": "open_session", "summary": "open a session of one's own (its own viewer process)",
            "responses": {"201": json_response(f"the session id to send as the {session_header} header", {
                "type": "object", "required": ["ok", "session", "header"], "properties": {
                    "ok": {"type": "boolean"}, "session": {"type": "string"}, "header": {"type": "string"},
                    "number": {"type": "integer"}, "idle_timeout_s": {"type": ["number", "null"]}}}),
                **error_responses("401", "405", "503"),
                "409": json_response("this server keeps one shared scene: no sessions", RESULT_REF)}}},
        "/v1/sessions/{session}": {"delete": {
            "operationId": "end_session", "summary": "end a session (its viewer process stops)",
            "parameters": [{"name": "session", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": json_response("ended", {"type": "object", "properties": {
                "ok": {"type": "boolean"}, "session": {"type": "string"}, "closed": {"type": "boolean"}}}),
                **error_responses("401", "404", "405"),
                "409": json_response("this server keeps one shared scene: no sessions", RESULT_REF)}}},
    }
    for spec in sorted(actions, key=lambda spec: spec.name):
        paths[f"/v1/actions/{spec.name}"] = action_operation(spec)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": f"MedOpenClaw REST ({application})", "version": __version__,
                 "description": "Named, schema-checked, audited viewer actions on 127.0.0.1. Every request needs "
                                "the bearer token; clients act as 'agent'. No route executes code."},
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "MEDOPENCLAW_TOKEN (printed at start-up when unset)"}},
            "schemas": {"Result": REST_RESULT_SCHEMA},
            "parameters": {"Session": {
                "name": session_header, "in": "header", "required": False, "schema": {"type": "string"},
                "description": "a session id from POST /v1/sessions; without it the request acts on the shared "
                               "session"}},
            "responses": {f"E{status}": json_response(reason, RESULT_REF) for status, reason in ERRORS.items()},
        },
    }
