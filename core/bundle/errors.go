package bundle

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a bundle, at a file and line (0 = the
// file as a whole).
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Msg)
}

// LoadError is a refused bundle: every problem found, up to a cap.
type LoadError struct {
	Dir      string
	Problems []Problem // sorted by file and line
	More     int       // problems found beyond the cap
}

func (e *LoadError) Error() string {
	var b strings.Builder
	n := len(e.Problems) + e.More
	fmt.Fprintf(&b, "bundle %s: %d problem", e.Dir, n)
	if n != 1 {
		b.WriteString("s")
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n  and %d more", e.More)
	}
	return b.String()
}

// problems collects problems up to a cap; safe for one goroutine.
type problems struct {
	max  int
	list []Problem
	more int
	// maxFileBytes is the load's cap on one file (Options.MaxFileBytes).
	maxFileBytes int64
}

func (ps *problems) add(file string, line int, format string, args ...any) {
	if len(ps.list) >= ps.max*4 { // keep a margin so sorting picks the earliest
		ps.more++
		return
	}
	ps.list = append(ps.list, Problem{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (ps *problems) merge(o *problems) {
	for _, p := range o.list {
		ps.add(p.File, p.Line, "%s", p.Msg)
	}
	ps.more += o.more
}

func (ps *problems) count() int { return len(ps.list) + ps.more }

func (ps *problems) err(dir string) error {
	if ps.count() == 0 {
		return nil
	}
	list := append([]Problem(nil), ps.list...)
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].File != list[j].File {
			return list[i].File < list[j].File
		}
		return list[i].Line < list[j].Line
	})
	more := ps.more
	if len(list) > ps.max {
		more += len(list) - ps.max
		list = list[:ps.max]
	}
	return &LoadError{Dir: dir, Problems: list, More: more}
}
