package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// maxLine bounds one line read back: a record holds at most its replies
// and their bounded answers, far below it.
const maxLine = 1 << 30

// ReadStats say what Read read and what it skipped.
type ReadStats struct {
	Files   int
	Records int
	// Skipped counts lines that are no record (a line cut off by a kill is
	// not counted: it is the last, without its newline); FirstSkip says
	// where the first was and why.
	Skipped   int
	FirstSkip error
	// Partial counts last lines cut off mid-write (a server killed while
	// writing), left unread.
	Partial int
}

// Read calls fn with each record of paths, in order: a directory's
// transcript files in day and rotation order, a file as it is. fn's error
// stops the read and is returned.
func Read(paths []string, fn func(*Record) error) (ReadStats, error) {
	var st ReadStats
	files, err := Files(paths)
	if err != nil {
		return st, err
	}
	for _, path := range files {
		st.Files++
		if err := readFile(path, &st, fn); err != nil {
			return st, err
		}
	}
	return st, nil
}

// Files lists the files paths name: each directory's *.jsonl files in
// day and rotation order, each file as given. A path that does not exist
// is an error naming it.
func Files(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("transcripts: %w", err)
		}
		if !fi.IsDir() {
			out = append(out, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.jsonl"))
		if err != nil {
			return nil, fmt.Errorf("transcripts: %s: %w", p, err)
		}
		sort.Slice(matches, func(i, j int) bool { return fileBefore(filepath.Base(matches[i]), filepath.Base(matches[j])) })
		out = append(out, matches...)
	}
	return out, nil
}

// fileBefore orders DAY.jsonl before DAY.1.jsonl before DAY.2.jsonl, days
// in order, other names after them by name.
func fileBefore(a, b string) bool {
	da, sa, oka := parseFileName(a)
	db, sb, okb := parseFileName(b)
	switch {
	case oka && okb && da != db:
		return da < db
	case oka && okb:
		return sa < sb
	case oka != okb:
		return oka
	}
	return a < b
}

func readFile(path string, st *ReadStats, fn func(*Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("transcripts: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	for line := 1; ; line++ {
		b, err := readLine(br)
		if errors.Is(err, io.EOF) {
			if len(bytes.TrimSpace(b)) > 0 {
				st.Partial++
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("transcripts: reading %s: %w", path, err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil || r.EpisodeID == "" {
			if err == nil {
				err = errors.New("no episode_id: not a transcript record")
			}
			st.Skipped++
			if st.FirstSkip == nil {
				st.FirstSkip = fmt.Errorf("%s line %d: %w", path, line, err)
			}
			continue
		}
		st.Records++
		if err := fn(&r); err != nil {
			return err
		}
	}
}

// readLine reads one line with its newline; at the end it returns what
// is left without one and io.EOF.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return out, err
	}
}
