package cli

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// scrubEnv removes name from the environment, so no child inherits it,
// and blanks its value in the environment block the process started with:
// /proc/<pid>/environ shows that block, not Go's copy, for the process's
// whole life, so os.Unsetenv alone leaves a token there for anyone who may
// read the process's memory (the same user, root). Go keeps its own copy
// of every variable, so nothing in the program reads the block after start.
func scrubEnv(name string) error {
	os.Unsetenv(name)
	start, end, err := environBlock()
	if err != nil {
		return err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open /proc/self/mem: %w", err)
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, start); err != nil {
		return fmt.Errorf("read the environment block: %w", err)
	}
	prefix := []byte(name + "=")
	changed := false
	for off := 0; off < len(block); {
		n := bytes.IndexByte(block[off:], 0)
		if n < 0 {
			n = len(block) - off
		}
		if entry := block[off : off+n]; bytes.HasPrefix(entry, prefix) {
			clear(entry[len(prefix):])
			changed = true
		}
		off += n + 1
	}
	if !changed {
		return nil
	}
	if _, err := mem.WriteAt(block, start); err != nil {
		return fmt.Errorf("blank %s in the environment block: %w", name, err)
	}
	return nil
}

// environBlock reads where the process's initial environment lies in its
// memory: fields 50 and 51 (env_start, env_end) of /proc/self/stat.
func environBlock() (start, end int64, err error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (which may hold spaces) start at 3.
	i := bytes.LastIndexByte(b, ')')
	fields := strings.Fields(string(b[i+1:]))
	if i < 0 || len(fields) < 51-2 {
		return 0, 0, fmt.Errorf("/proc/self/stat has no env_start/env_end (Linux 3.5+)")
	}
	if start, err = strconv.ParseInt(fields[50-3], 10, 64); err == nil {
		end, err = strconv.ParseInt(fields[51-3], 10, 64)
	}
	if err != nil || end <= start {
		return 0, 0, fmt.Errorf("/proc/self/stat: bad env_start/env_end: %v", err)
	}
	return start, end, nil
}
