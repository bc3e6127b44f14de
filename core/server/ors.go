package server

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// orsOps are the operations of the ORS-style task API under /<bundle
// name>/, each with the one method it takes.
var orsOps = []struct{ method, name string }{
	{http.MethodGet, "splits"},
	{http.MethodPost, "tasks"},
	{http.MethodPost, "num_tasks"},
	{http.MethodPost, "task"},
	{http.MethodPost, "task_range"},
}

// orsTaskAPI serves the ORS-style task API OpenEnv task servers expose:
// GET /list_environments, GET /{env}/splits, POST /{env}/tasks,
// /{env}/num_tasks, /{env}/task and /{env}/task_range, where {env} is the
// bundle's name. The server hands it every path its own routes leave, so
// it also answers the rest: a JSON 404, or a 405 naming the method an
// operation takes.
func (s *Server) orsTaskAPI() http.Handler {
	handlers := map[string]http.HandlerFunc{
		"splits":     s.handleORSSplits,
		"tasks":      s.orsQuery(s.handleORSTasks),
		"num_tasks":  s.orsQuery(s.handleORSNumTasks),
		"task":       s.orsQuery(s.handleORSTask),
		"task_range": s.orsQuery(s.handleORSTaskRange),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /list_environments", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, []string{s.opts.Info.Name})
	})
	for _, op := range orsOps {
		mux.Handle(op.method+" /{env}/"+op.name, s.orsEnv(handlers[op.name]))
		mux.Handle("/{env}/"+op.name, s.orsEnv(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", op.method)
			writeHTTPError(w, http.StatusMethodNotAllowed, CodeValidation, fmt.Sprintf("%s needs %s", r.URL.Path, op.method))
		}))
	}
	mux.Handle("/{env}/{op}", s.orsEnv(noEndpoint))
	mux.HandleFunc("/", noEndpoint)
	return mux
}

func noEndpoint(w http.ResponseWriter, r *http.Request) {
	writeHTTPError(w, http.StatusNotFound, CodeNotFound, "no such endpoint: "+r.URL.Path)
}

// orsEnv answers a request for another environment than the bundle with
// a 404 that names the one served.
func (s *Server) orsEnv(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if env := r.PathValue("env"); env != s.opts.Info.Name {
			writeHTTPError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("Environment %q not found; this server serves %q", env, s.opts.Info.Name))
			return
		}
		h(w, r)
	}
}

func (s *Server) handleORSSplits(w http.ResponseWriter, _ *http.Request) {
	out := []map[string]string{}
	for _, sp := range s.opts.Catalog.Splits() {
		out = append(out, map[string]string{"name": sp.Name, "type": orsSplitType(sp.Name)})
	}
	writeJSON(w, http.StatusOK, out)
}

// orsRequest is the JSON body of the POST operations.
type orsRequest struct {
	Split string `json:"split"`
	Index *int   `json:"index"`
	Start *int   `json:"start"`
	Stop  *int   `json:"stop"`
}

// orsQuery reads a POST operation's body (1 MiB at most, a split
// required) before h answers it.
func (s *Server) orsQuery(h func(http.ResponseWriter, *http.Request, orsRequest)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var q orsRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		if err := dec.Decode(&q); err != nil {
			writeHTTPError(w, http.StatusUnprocessableEntity, CodeValidation, "request body: "+err.Error())
			return
		}
		if q.Split == "" {
			writeHTTPError(w, http.StatusUnprocessableEntity, CodeValidation, `request body: "split" is required`)
			return
		}
		h(w, r, q)
	}
}

func (s *Server) handleORSTasks(w http.ResponseWriter, r *http.Request, q orsRequest) {
	ts, _, err := s.opts.Catalog.Tasks(q.Split, 0, -1)
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": orsRecords(q.Split, ts), "env_name": r.PathValue("env")})
}

func (s *Server) handleORSNumTasks(w http.ResponseWriter, _ *http.Request, q orsRequest) {
	_, size, err := s.opts.Catalog.Tasks(q.Split, 0, 0)
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"num_tasks": size})
}

func (s *Server) handleORSTask(w http.ResponseWriter, _ *http.Request, q orsRequest) {
	if q.Index == nil || *q.Index < 0 {
		writeHTTPError(w, http.StatusBadRequest, CodeValidation, "Invalid task index")
		return
	}
	ts, _, err := s.opts.Catalog.Tasks(q.Split, *q.Index, *q.Index+1)
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	if len(ts) == 0 {
		writeHTTPError(w, http.StatusBadRequest, CodeValidation, "Invalid task index")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"task": orsRecord(q.Split, ts[0])})
}

func (s *Server) handleORSTaskRange(w http.ResponseWriter, _ *http.Request, q orsRequest) {
	start, stop := 0, -1
	if q.Start != nil {
		start = *q.Start
	}
	if q.Stop != nil {
		stop = *q.Stop
	}
	if start < 0 || (q.Stop != nil && stop < 0) {
		writeHTTPError(w, http.StatusBadRequest, CodeValidation, "start and stop must not be negative")
		return
	}
	if err := checkRange(start, stop); err != nil {
		writeHTTPError(w, http.StatusBadRequest, CodeValidation, err.Error())
		return
	}
	ts, _, err := s.opts.Catalog.Tasks(q.Split, start, stop)
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": orsRecords(q.Split, ts)})
}

func orsRecord(split string, t TaskEntry) map[string]any {
	return map[string]any{"index": t.Index, "task_id": t.TaskID, "toolset": t.Toolset, "split": split}
}

func orsRecords(split string, ts []TaskEntry) []map[string]any {
	out := make([]map[string]any, len(ts))
	for i, t := range ts {
		out[i] = orsRecord(split, t)
	}
	return out
}

// orsSplitType maps a split name to ORS's split types.
func orsSplitType(name string) string {
	switch name {
	case "train", "validation", "test":
		return name
	}
	return "validation"
}
