package importrules

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Row is one row of the architecture page's parts table: the folders it
// covers (its part column) and the names its "may import" column allows.
type Row struct {
	Line  int      // 1-based line on the page, for messages
	Parts []string // folders of the repository, "plugins/<kind>-<name>" style segments allowed
	Names []string // as written, without the trailing "/" or "/*"
}

// Label is how messages name the row: its part column.
func (r Row) Label() string { return strings.Join(r.Parts, ", ") }

// header is the parts table's header row; the table runs to the first
// line that is not a table row.
const header = "| part | holds | may import |"

var (
	backticked = regexp.MustCompile("`([^`]*)`")
	// A name in the column is a folder path: anything else in backticks
	// (a Go identifier such as `Live`) is refused by the check, not here.
	parenthesised = regexp.MustCompile(`\([^()]*\)`)
)

// ParseTable reads the parts table from an architecture page. In the part
// column every name in backticks is a part; in the "may import" column
// every name in backticks outside parentheses is an allowed import (words
// and parenthesised notes are for the reader).
func ParseTable(r io.Reader) ([]Row, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var rows []Row
	in, seen := false, false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !in {
			if line == header {
				if seen {
					return nil, fmt.Errorf("line %d: a second parts table (%q): keep one", n, header)
				}
				in, seen = true, true
			}
			continue
		}
		if !strings.HasPrefix(line, "|") {
			in = false
			continue
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		cells := splitRow(line)
		if len(cells) != 3 {
			return nil, fmt.Errorf("line %d: the parts table's row has %d cells, want 3 (part | holds | may import)", n, len(cells))
		}
		row := Row{Line: n}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			row.Parts = append(row.Parts, clean(m[1]))
		}
		if len(row.Parts) == 0 {
			return nil, fmt.Errorf("line %d: the part column names no folder in backticks", n)
		}
		col := cells[2]
		for {
			// Innermost first, so nested notes go too.
			next := parenthesised.ReplaceAllString(col, "")
			if next == col {
				break
			}
			col = next
		}
		for _, m := range backticked.FindAllStringSubmatch(col, -1) {
			row.Names = append(row.Names, clean(m[1]))
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !seen {
		return nil, fmt.Errorf("no parts table: no line %q", header)
	}
	return rows, nil
}

// splitRow splits a table row into its cells. Backticked text may hold a
// "|" ("`split|index`"), so only bars outside backticks split.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	code := false
	for _, c := range line {
		switch {
		case c == '`':
			code = !code
		case c == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteRune(c)
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// clean drops the marks that say "and below" ("sdk/", "core/*"): every
// name allows its whole folder.
func clean(name string) string {
	name = strings.TrimSuffix(name, "*")
	return strings.TrimSuffix(name, "/")
}
