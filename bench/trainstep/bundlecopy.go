package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/agentenv/agentenv/core/bundle"
)

// servedBundles makes the bundles the run serves, in work: a copy of
// o.bundle whose envs need no build (their binaries built here first, or
// --env-bin's, so a machine without Go runs it), and with --reuse N a
// second copy whose envs declare reuse = N. It returns their paths ("" for
// no reuse copy).
func servedBundles(ctx context.Context, o options, work string) (fresh, reused string, err error) {
	b, err := bundle.Load(o.bundle, bundle.Options{})
	if err != nil {
		return "", "", err
	}
	if o.envBin == "" {
		for _, env := range b.Envs {
			if err := buildEnv(ctx, env); err != nil {
				return "", "", fmt.Errorf("env %s: %w", env.Name, err)
			}
		}
	}
	fresh = filepath.Join(work, "bundle")
	if err := copyBundle(o, fresh, 0); err != nil {
		return "", "", err
	}
	if o.reuse > 1 {
		reused = filepath.Join(work, fmt.Sprintf("bundle-reuse-%d", o.reuse))
		if err := copyBundle(o, reused, o.reuse); err != nil {
			return "", "", err
		}
	}
	return fresh, reused, nil
}

// copyBundle copies o.bundle to dst, each env.toml without its build,
// its command --env-bin when given, and reuse = reuse when over 1.
func copyBundle(o options, dst string, reuse int) error {
	err := filepath.WalkDir(o.bundle, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(o.bundle, path)
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case d.Name() == "env.toml" && filepath.Base(filepath.Dir(filepath.Dir(path))) == "envs":
			return rewriteEnv(path, out, o.envBin, reuse)
		case !d.Type().IsRegular():
			return nil
		}
		return copyFile(path, out)
	})
	if err != nil {
		return fmt.Errorf("copying bundle %s: %w", o.bundle, err)
	}
	return nil
}

func rewriteEnv(src, dst, envBin string, reuse int) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	m := map[string]any{}
	if err := toml.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	delete(m, "build")
	if envBin != "" {
		abs, err := filepath.Abs(envBin)
		if err != nil {
			return err
		}
		m["command"] = []string{abs}
	}
	if reuse > 1 {
		m["reuse"] = reuse
	} else {
		delete(m, "reuse")
		delete(m, "reset_tool")
	}
	out, err := toml.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, out, 0o644)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// envCommand is the env's program, resolved as the sandbox resolves it.
func envCommand(env *bundle.Env) string {
	if filepath.IsAbs(env.Command[0]) {
		return env.Command[0]
	}
	return filepath.Join(env.Dir, env.Command[0])
}
