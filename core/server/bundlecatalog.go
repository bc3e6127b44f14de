package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
)

// BundleCatalog is the Catalog of a loaded bundle.
type BundleCatalog struct{ b *bundle.Bundle }

// NewBundleCatalog serves b's splits and tasks.
func NewBundleCatalog(b *bundle.Bundle) *BundleCatalog { return &BundleCatalog{b: b} }

// Splits implements Catalog.
func (c *BundleCatalog) Splits() []Split {
	out := make([]Split, len(c.b.Splits))
	for i, s := range c.b.Splits {
		out[i] = Split{Name: s.Name, Size: len(s.Tasks)}
	}
	return out
}

// Tasks implements Catalog.
func (c *BundleCatalog) Tasks(split string, start, stop int) ([]TaskEntry, int, error) {
	s, err := c.b.Split(split)
	if err != nil {
		return nil, 0, &episode.Error{Code: episode.CodeNotFound, Err: err}
	}
	size := len(s.Tasks)
	if stop < 0 || stop > size {
		stop = size
	}
	if start > stop {
		start = stop
	}
	out := make([]TaskEntry, 0, stop-start)
	for i := start; i < stop; i++ {
		t := s.Tasks[i]
		out = append(out, TaskEntry{Index: i, TaskID: t.ID, Toolset: t.Toolset})
	}
	return out, size, nil
}

// Task implements Catalog.
func (c *BundleCatalog) Task(id string) (TaskInfo, error) {
	t, err := c.b.Task(id)
	if err != nil {
		return TaskInfo{}, &episode.Error{Code: episode.CodeNotFound, Err: err}
	}
	info := TaskInfo{TaskID: t.ID, Toolset: t.Toolset, Prompt: []episode.Message{}, Steps: make([]StepInfo, len(t.Steps))}
	for i, s := range t.Steps {
		info.Steps[i] = StepInfo{ID: s.ID, Type: s.Type}
		if s.Type != bundle.StepPromptAgent {
			continue
		}
		if info.Turns == 0 {
			if s.SystemPrompt != "" {
				info.Prompt = append(info.Prompt, episode.Message{Role: "system", Content: s.SystemPrompt})
			}
			info.Prompt = append(info.Prompt, episode.Message{Role: "user", Content: s.Prompt})
		}
		info.Turns++
	}
	return info, nil
}

// BundleInfo is /metadata for b: its name, description and README.
func BundleInfo(b *bundle.Bundle, version string) (Info, error) {
	info := Info{Name: b.Name, Description: b.Description, Version: version}
	readme, err := os.ReadFile(filepath.Join(b.Dir, "README.md"))
	switch {
	case err == nil:
		info.Readme = string(readme)
	case !errors.Is(err, fs.ErrNotExist):
		return Info{}, fmt.Errorf("bundle %s: read README.md: %w", b.Name, err)
	}
	return info, nil
}
