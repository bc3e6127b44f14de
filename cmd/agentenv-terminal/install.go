package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// installArg, then DEST, makes the binary copy itself to DEST (mode 0755,
// written whole, then renamed) and exit: the Kubernetes sandbox's init
// container runs it so from a FROM-scratch image, which has no cp, into
// the volume the env container mounts read-only.
const installArg = "install"

// install does installArg with args and returns the exit status, saying
// what failed on out.
func install(args []string, out io.Writer) int {
	if err := installTo(args); err != nil {
		fmt.Fprintf(out, "agentenv-terminal %s: %v\n", installArg, err)
		return 1
	}
	return 0
}

// installTo copies this executable to args[0], whole or not at all.
func installTo(args []string) (err error) {
	if len(args) != 1 || args[0] == "" {
		return fmt.Errorf("want one argument, the path to copy the binary to (agentenv-terminal install DEST), got %q", args)
	}
	dest := args[0]
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	src, err := os.Open(exe)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, src); err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", dest, err)
	}
	return os.Rename(tmp.Name(), dest)
}
