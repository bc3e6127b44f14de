package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentenv/agentenv/core/regularfile"
)

// DefaultMaxFileBytes caps one file of a bundle (Options.MaxFileBytes).
const DefaultMaxFileBytes = 256 << 20

// readBundleFile reads one file of a bundle: a regular file (directly or
// through symlinks) of at most max bytes.
func readBundleFile(path string, max int64) ([]byte, error) {
	data, err := regularfile.Read(path, max)
	var big *regularfile.TooBigError
	switch {
	case errors.Is(err, regularfile.ErrNotRegular):
		return nil, fmt.Errorf("%w; a bundle holds plain files (a symlink must lead to one)", err)
	case errors.As(err, &big):
		return nil, fmt.Errorf("%w for one bundle file", err)
	}
	return data, err
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
