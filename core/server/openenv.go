package server

import (
	"encoding/json"
	"net/http"
)

// The introspection endpoints OpenEnv serves and `openenv validate --url`
// checks: /metadata, /schema, /openapi.json and POST /mcp.

func (s *Server) handleMetadata(w http.ResponseWriter, _ *http.Request) {
	var readme any
	if s.opts.Info.Readme != "" {
		readme = s.opts.Info.Readme
	}
	var version any
	if s.opts.Info.Version != "" {
		version = s.opts.Info.Version
	}
	desc := s.opts.Info.Description
	if desc == "" {
		desc = s.opts.Info.Name + " tasks served by agentenv"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"name":              s.opts.Info.Name,
		"description":       desc,
		"readme_content":    readme,
		"version":           version,
		"author":            nil,
		"documentation_url": nil,
	})
}

// Hand-written JSON Schemas of the wire payloads. "reset" is ours; OpenEnv
// has only action, observation and state.
var schemas = json.RawMessage(`{
"action": {"title": "StepAction", "type": "object", "additionalProperties": false,
  "properties": {"reply": {"type": "string", "description": "The model's reply text; tool calls in it are parsed in the session's tool-call format."}},
  "required": ["reply"]},
"observation": {"title": "EpisodeObservation", "type": "object",
  "properties": {
    "episode_id": {"type": "string"},
    "task_id": {"type": "string"},
    "messages": {"type": "array", "items": {"type": "object", "properties": {"role": {"type": "string"}, "content": {"type": "string"}}, "required": ["role", "content"]}},
    "tools": {"type": "array", "items": {"type": "object", "description": "OpenAI function schema: {type: function, function: {name, description, parameters}}"}},
    "turn": {"type": "integer", "minimum": 0},
    "metrics": {"type": "object", "additionalProperties": {"type": "number"}, "description": "Set when done: score/<step id>, tool_calls, unparsed_calls, turns, failed."},
    "times": {"type": "object", "additionalProperties": {"type": "number"}, "description": "Set when done: seconds the episode spent in each phase: queue, deploy, ready, setup, step, tool (part of step), verify, teardown (0 here: it runs after)."},
    "done": {"type": "boolean", "default": false},
    "reward": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": null}
  },
  "required": ["episode_id", "task_id", "messages", "turn"]},
"state": {"title": "State", "type": "object", "additionalProperties": true,
  "properties": {
    "episode_id": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
    "step_count": {"type": "integer", "minimum": 0, "default": 0}
  }},
"reset": {"title": "ResetData", "type": "object", "additionalProperties": false,
  "properties": {
    "split": {"type": "string"}, "index": {"type": "integer", "minimum": 0},
    "task_id": {"type": "string"},
    "tool_format": {"type": "string"}, "max_turns": {"type": "integer", "minimum": 0},
    "episode_id": {"type": "string", "maxLength": 255},
    "wait_s": {"type": "number", "minimum": 0},
    "seed": {"type": "integer", "minimum": 0}
  }}
}`)

func (s *Server) handleSchema(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(schemas) //nolint:errcheck
}

// handleOpenAPI lists the served paths. There are no HTTP /reset, /step
// or /state (episodes live on /ws), which `openenv validate` reads as
// OpenEnv's production profile.
func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	get := map[string]any{"get": map[string]any{"responses": map[string]any{"200": map[string]any{"description": "OK"}}}}
	post := map[string]any{"post": map[string]any{"responses": map[string]any{"200": map[string]any{"description": "OK"}}}}
	paths := map[string]any{
		"/health": get, "/livez": get, "/metadata": get, "/schema": get, "/metrics": get, "/ws": get, "/mcp": post,
		"/splits": get, "/splits/{split}/tasks": get, "/tasks/{task_id}": get, "/toolsets/{toolset}/tools": get,
		"/list_environments": get, "/{env_name}/splits": get,
		"/{env_name}/tasks": post, "/{env_name}/num_tasks": post, "/{env_name}/task": post, "/{env_name}/task_range": post,
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "agentenv OpenEnv server: " + s.opts.Info.Name, "version": "1.0.0"},
		"paths":   paths,
	})
}

// handleMCP answers OpenEnv's JSON-RPC /mcp probe. Tools are reached only
// through an episode's replies, so every well-formed call is "method not
// found"; the shape (HTTP 200, id echoed, error with data) is OpenEnv's.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request) {
	rpcErr := func(id json.RawMessage, code int, msg string) {
		if id == nil {
			id = json.RawMessage("null")
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"jsonrpc": "2.0", "id": id,
			"error": map[string]any{"code": code, "message": msg, "data": nil},
		})
	}
	var req map[string]json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		rpcErr(nil, -32700, "Parse error")
		return
	}
	id := req["id"]
	var version, method string
	if json.Unmarshal(req["jsonrpc"], &version) != nil || version != "2.0" ||
		json.Unmarshal(req["method"], &method) != nil || method == "" {
		rpcErr(id, -32600, `Invalid request: want {"jsonrpc":"2.0","method":...}`)
		return
	}
	rpcErr(id, -32601, "Method not found: "+method+" (tools are reached through episodes on /ws)")
}
