package bundle

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultMaxFileBytes caps one file of a bundle (Options.MaxFileBytes).
const DefaultMaxFileBytes = 256 << 20

// readBundleFile reads one file of a bundle. Only a regular file is read,
// directly or through symlinks: a device (/dev/zero) would be read until
// memory runs out and a FIFO would block the loader forever, so both are
// refused, as is a file over max bytes.
func readBundleFile(path string, max int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regular(fi); err != nil {
		return nil, err
	}
	// O_NONBLOCK: should the file have become a FIFO since the Stat, the
	// open returns at once and the Stat of the open file refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := regular(fi); err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, tooBig(fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, tooBig(int64(len(data)), max)
	}
	return data, nil
}

func tooBig(n, max int64) error {
	return fmt.Errorf("%d bytes, over the limit of %d bytes for one bundle file", n, max)
}

// regular refuses anything but a regular file, naming what it is.
func regular(fi fs.FileInfo) error {
	m := fi.Mode()
	if m.IsRegular() {
		return nil
	}
	what := "a special file"
	switch {
	case m.IsDir():
		what = "a folder"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	}
	return fmt.Errorf("not a regular file but %s; a bundle holds plain files (a symlink must lead to one)", what)
}

// isDirFollowing reports whether path is a folder, following symlinks;
// a broken symlink is not one.
func isDirFollowing(e fs.DirEntry, path string) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// outsideLinks lists, as warnings, the symlinks among the paths the loader
// reads (README.md, envs/*, envs/*/env.toml, tasks/*, evals/*) that lead
// out of the bundle's folder. They are followed like any file, but the
// bundle then depends on files it does not hold, which a copy of it
// (a deploy, an archive) loses.
func outsideLinks(dir string) []string {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil
	}
	var paths []string
	add := func(rel string) { paths = append(paths, filepath.Join(dir, rel)) }
	add("README.md")
	for _, sub := range []string{"envs", "tasks", "evals"} {
		add(sub)
		entries, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range entries {
			add(filepath.Join(sub, e.Name()))
			if sub == "envs" {
				add(filepath.Join(sub, e.Name(), "env.toml"))
			}
		}
	}
	var warnings []string
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue // broken: the loader reports it where it reads it
		}
		if target, err = filepath.Abs(target); err != nil || inside(root, target) {
			continue
		}
		warnings = append(warnings, fmt.Sprintf("%s is a symlink to %s, outside the bundle: it is followed, but a copy of the bundle may not carry it", p, target))
	}
	return warnings
}

func inside(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
