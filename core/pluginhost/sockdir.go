package pluginhost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sockDirPrefix names the folders that hold a host's plugin sockets:
// <prefix><host pid>-<random>. The pid lets a later host remove the folder
// of one that was killed before it could.
const sockDirPrefix = "agentenv-plugins-"

// makeSockDir makes this host's socket folder, first removing those of
// hosts that are no longer running.
func makeSockDir() (string, error) {
	sweepSockDirs(os.TempDir())
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", sockDirPrefix, os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("plugin host: make a folder for plugin sockets: %w", err)
	}
	return dir, nil
}

// sweepSockDirs removes the socket folders in tmp whose host process is
// gone. It is best effort: a folder it cannot judge or remove stays.
func sweepSockDirs(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, sockDirPrefix+"*-*"))
	for _, d := range dirs {
		pidText, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(d), sockDirPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}
