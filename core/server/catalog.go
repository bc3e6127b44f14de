package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentenv/agentenv/core/episode"
)

// Catalog lists what a bundle serves. Errors carry episode codes
// (CodeNotFound for an unknown split or task) so they map to HTTP statuses.
type Catalog interface {
	// Splits returns every split in order, "all" first.
	Splits() []Split
	// Tasks returns the tasks of split with index in [start, stop) and the
	// split's size; stop < 0 or past the end means the end.
	Tasks(split string, start, stop int) ([]TaskEntry, int, error)
	// Task returns one task by id.
	Task(id string) (TaskInfo, error)
}

// Split is a split and its size.
type Split struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// TaskEntry is a task's place in a split.
type TaskEntry struct {
	Index   int    `json:"index"`
	TaskID  string `json:"task_id"`
	Toolset string `json:"toolset"`
}

// TaskInfo describes one task.
type TaskInfo struct {
	TaskID  string `json:"task_id"`
	Toolset string `json:"toolset"`
	// Prompt is the opening messages of the first model turn.
	Prompt []episode.Message `json:"prompt"`
	// Turns is the number of model turns (prompt_agent steps).
	Turns int        `json:"turns"`
	Steps []StepInfo `json:"steps"`
}

// StepInfo names a task step.
type StepInfo struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// toolsTimeout bounds the first, deploying, Tools call of a toolset.
const toolsTimeout = 5 * time.Minute

func httpStatus(code episode.Code) int {
	switch code {
	case episode.CodeNotFound:
		return http.StatusNotFound
	case episode.CodeValidation:
		return http.StatusBadRequest
	case episode.CodeDeploy:
		return http.StatusBadGateway
	default:
		return http.StatusInternalServerError
	}
}

func (s *Server) writeFailure(w http.ResponseWriter, err error) {
	code := episode.CodeOf(err)
	msg, brief := s.failureMessage(err)
	if brief {
		s.log.Warn("catalogue request failed", "code", code, "error", err)
		msg += " (the server's log has the details)"
	}
	writeHTTPError(w, httpStatus(code), string(code), msg)
}

func (s *Server) handleSplits(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"splits": s.opts.Catalog.Splits()})
}

// handleSplitTasks serves GET /splits/{split}/tasks?start=&stop=.
func (s *Server) handleSplitTasks(w http.ResponseWriter, r *http.Request) {
	split := r.PathValue("split")
	q := r.URL.Query()
	start, err := queryInt(q.Get("start"), 0)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, CodeValidation, "start: "+err.Error())
		return
	}
	stop, err := queryInt(q.Get("stop"), -1)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, CodeValidation, "stop: "+err.Error())
		return
	}
	if err := checkRange(start, stop); err != nil {
		writeHTTPError(w, http.StatusBadRequest, CodeValidation, err.Error())
		return
	}
	tasks, size, err := s.opts.Catalog.Tasks(split, start, stop)
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	if stop < 0 || stop > size {
		stop = size
	}
	if start > stop {
		start = stop
	}
	if tasks == nil {
		tasks = []TaskEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"split": split, "size": size, "start": start, "stop": stop, "tasks": tasks})
}

// checkRange refuses a range whose start is past its stop (stop < 0: to
// the end), rather than answering it with an empty list.
func checkRange(start, stop int) error {
	if stop >= 0 && start > stop {
		return fmt.Errorf("start %d is past stop %d: give start <= stop", start, stop)
	}
	return nil
}

// queryInt reads a non-negative integer query value; "" gives def.
func queryInt(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a non-negative integer, got %q", v)
	}
	return n, nil
}

func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	t, err := s.opts.Catalog.Task(r.PathValue("id"))
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) handleToolsetTools(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.extendWriteDeadline(w, toolsTimeout)
	ctx, cancel := context.WithTimeout(r.Context(), toolsTimeout)
	defer cancel()
	tools, err := s.opts.Player.Tools(ctx, id)
	if err != nil {
		s.writeFailure(w, err)
		return
	}
	if tools == nil {
		tools = []episode.Tool{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"toolset": id, "tools": openAITools(tools)})
}
