package bundle

import (
	"bufio"
	"bytes"
	"strings"
)

// readDescription returns the first line of real text of a README: front
// matter, blank lines, HTML, badges and images are skipped; a heading is
// used only when no plain line follows it.
func readDescription(file string, max int64) (string, error) {
	data, err := readBundleFile(file, max)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	heading := ""
	inFront, inComment, inFence := false, false, false
	for n := 0; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case n == 0 && line == "---":
			inFront = true
		case inFront:
			inFront = line != "---"
		case inComment:
			inComment = !strings.Contains(line, "-->")
		case strings.HasPrefix(line, "```"):
			inFence = !inFence
		case inFence, line == "":
		case strings.HasPrefix(line, "<!--"):
			inComment = !strings.Contains(line, "-->")
		case strings.HasPrefix(line, "<"), strings.HasPrefix(line, "[!["), strings.HasPrefix(line, "!["):
		case strings.HasPrefix(line, "#"):
			if heading == "" {
				heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
			}
		case strings.Trim(line, "=-") == "": // setext underline
		default:
			return line, nil
		}
	}
	return heading, nil
}
