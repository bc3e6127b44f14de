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

	"github.com/agentenv/agentenv/core/regularfile"
)

// MaxLine bounds one line read back. The writer writes a record of an
// episode's replies and their bounded answers on one line; a longer line
// (no record the server wrote, or one from before records were bounded)
// is skipped unread, with a note, rather than held in memory.
const MaxLine = 256 << 20

// maxLine is MaxLine, lowered by tests.
var maxLine = MaxLine

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
			if err := regularfile.Check(fi); err != nil {
				return nil, notTranscript(p, err)
			}
			out = append(out, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.jsonl"))
		if err != nil {
			return nil, fmt.Errorf("transcripts: %s: %w", p, err)
		}
		for _, m := range matches {
			// A FIFO would block the read for ever, a link to /dev/zero
			// never end: refused before anything is read.
			if fi, err := os.Stat(m); err == nil {
				if err := regularfile.Check(fi); err != nil {
					return nil, notTranscript(m, err)
				}
			}
		}
		sort.Slice(matches, func(i, j int) bool { return fileBefore(filepath.Base(matches[i]), filepath.Base(matches[j])) })
		out = append(out, matches...)
	}
	return out, nil
}

func notTranscript(path string, err error) error {
	return fmt.Errorf("transcripts: %s: %w: transcripts are the plain files serve --record writes; pass those or their directory", path, err)
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
	f, _, err := regularfile.Open(path)
	if errors.Is(err, regularfile.ErrNotRegular) {
		return notTranscript(path, err)
	}
	if err != nil {
		return fmt.Errorf("transcripts: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	for line := 1; ; line++ {
		b, err := readLine(br, maxLine)
		var long *longLineError
		if errors.As(err, &long) {
			st.Skipped++
			if st.FirstSkip == nil {
				st.FirstSkip = fmt.Errorf("%s line %d: %w", path, line, err)
			}
			if long.eof {
				return nil
			}
			continue
		}
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

// longLineError is a line over the bound, read past to its end unkept.
type longLineError struct {
	max int
	eof bool // the line ran to the end of the file
}

func (e *longLineError) Error() string {
	return fmt.Sprintf("a line longer than %d bytes, skipped", e.max)
}

// readLine reads one line with its newline; at the end it returns what
// is left without one and io.EOF. A line over max bytes is read past to
// its end, discarded as it goes, and returned as a *longLineError.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(out)+len(chunk) > max {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, &longLineError{max: max, eof: err != nil}
		}
		out = append(out, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return out, err
	}
}
