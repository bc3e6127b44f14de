package sandbox

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// elfFile writes a minimal 64-bit little-endian ELF file: a header and its
// program headers (a PT_LOAD, and a PT_INTERP when dynamic).
func elfFile(t *testing.T, path string, typ elf.Type, machine elf.Machine, dynamic bool, mode os.FileMode) {
	t.Helper()
	progs := []elf.Prog64{{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Align: 0x1000}}
	if dynamic {
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R), Align: 1})
	}
	h := elf.Header64{
		Type: uint16(typ), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs)),
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		if err := binary.Write(&buf, binary.LittleEndian, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), mode); err != nil {
		t.Fatal(err)
	}
}

func hostMachine(t *testing.T) elf.Machine {
	m, ok := elfMachines[runtime.GOARCH]
	if !ok {
		t.Skipf("no ELF machine known for %s", runtime.GOARCH)
	}
	return m
}

func otherMachine(m elf.Machine) elf.Machine {
	if m == elf.EM_AARCH64 {
		return elf.EM_X86_64
	}
	return elf.EM_AARCH64
}

func TestFindTerminalBinary(t *testing.T) {
	host := hostMachine(t)
	type file struct {
		path    string // under the test's root
		typ     elf.Type
		machine elf.Machine
		dynamic bool
		mode    os.FileMode
		text    string // a plain text file instead of an ELF
		link    string // a symlink to this (under root) instead
	}
	static := func(p string) file { return file{path: p, typ: elf.ET_EXEC, machine: host, mode: 0o755} }
	pie := func(p string) file { return file{path: p, typ: elf.ET_DYN, machine: host, mode: 0o755} }
	dynamic := func(p string) file { f := static(p); f.dynamic = true; return f }
	cases := []struct {
		name     string
		files    []file
		override string // $AGENTENV_TERMINAL_BINARY, under root
		plugins  []string
		want     string   // the path found, under root
		errHas   []string // else the error holds these
	}{
		{name: "override", files: []file{static("x/term"), static("bin/agentenv-terminal")}, override: "x/term", want: "x/term"},
		{name: "override static PIE", files: []file{pie("x/term")}, override: "x/term", want: "x/term"},
		{name: "override dynamic", files: []file{dynamic("x/term")}, override: "x/term",
			errHas: []string{"$AGENTENV_TERMINAL_BINARY: terminal binary ROOT/x/term is dynamically linked", "make build", "CGO_ENABLED=0 go build -o bin/agentenv-terminal ./cmd/agentenv-terminal"}},
		{name: "override missing", override: "x/none", errHas: []string{"$AGENTENV_TERMINAL_BINARY: terminal binary ROOT/x/none:", "no such file"}},
		{name: "override not ELF", files: []file{{path: "x/term", text: "#!/bin/sh\n", mode: 0o755}}, override: "x/term",
			errHas: []string{"is not an ELF executable"}},
		{name: "override not executable", files: []file{{path: "x/term", typ: elf.ET_EXEC, machine: host, mode: 0o644}}, override: "x/term",
			errHas: []string{"is not an executable file"}},
		{name: "override another architecture", files: []file{{path: "x/term", typ: elf.ET_EXEC, machine: otherMachine(host), mode: 0o755}}, override: "x/term",
			errHas: []string{"is built for", "not this machine's " + runtime.GOARCH}},
		{name: "override an object file", files: []file{{path: "x/term", typ: elf.ET_REL, machine: host, mode: 0o755}}, override: "x/term",
			errHas: []string{"not an executable"}},
		{name: "override link resolved", files: []file{static("real/term"), {path: "x/term", link: "real/term"}}, override: "x/term", want: "real/term"},
		{name: "beside the executable", files: []file{static("bin/agentenv-terminal"), static("p1/agentenv-terminal")}, plugins: []string{"p1"},
			want: "bin/agentenv-terminal"},
		{name: "on the plugin path", files: []file{static("p2/agentenv-terminal")}, plugins: []string{"p1", "", "p2"},
			want: "p2/agentenv-terminal"},
		{name: "in ~/.agentenv/plugins", files: []file{static("home/.agentenv/plugins/agentenv-terminal")}, plugins: []string{"p1"},
			want: "home/.agentenv/plugins/agentenv-terminal"},
		{name: "the first found decides", files: []file{dynamic("bin/agentenv-terminal"), static("p1/agentenv-terminal")}, plugins: []string{"p1"},
			errHas: []string{"terminal binary ROOT/bin/agentenv-terminal is dynamically linked"}},
		{name: "none", plugins: []string{"p1"},
			errHas: []string{"no agentenv-terminal found (looked in ROOT/bin, ROOT/p1, ROOT/home/.agentenv/plugins): build it with `make build`"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range c.files {
				p := filepath.Join(root, f.path)
				switch {
				case f.link != "":
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(filepath.Join(root, f.link), p); err != nil {
						t.Fatal(err)
					}
				case f.text != "":
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, []byte(f.text), f.mode); err != nil {
						t.Fatal(err)
					}
				default:
					elfFile(t, p, f.typ, f.machine, f.dynamic, f.mode)
				}
			}
			override := ""
			if c.override != "" {
				override = filepath.Join(root, c.override)
			}
			var dirs []string
			for _, d := range c.plugins {
				if d != "" {
					d = filepath.Join(root, d)
				}
				dirs = append(dirs, d)
			}
			got, err := findTerminalBinary(override, filepath.Join(root, "bin", "agentenv"),
				strings.Join(dirs, string(filepath.ListSeparator)), filepath.Join(root, "home"))
			if c.want != "" {
				if err != nil {
					t.Fatalf("error: %v", err)
				}
				if want := filepath.Join(root, c.want); got != want {
					t.Errorf("found %s, want %s", got, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("found %s, want an error", got)
			}
			for _, h := range c.errHas {
				if h = strings.ReplaceAll(h, "ROOT", root); !strings.Contains(err.Error(), h) {
					t.Errorf("error %q lacks %q", err, h)
				}
			}
		})
	}
}

// The executable running these tests is a real ELF of this machine; it
// passes the check unless it is linked dynamically, which the check says.
func TestCheckTerminalBinaryOnARealExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Skipf("the test binary is not ELF: %v", err)
	}
	dynamic := false
	for _, p := range f.Progs {
		dynamic = dynamic || p.Type == elf.PT_INTERP
	}
	f.Close()
	err = CheckTerminalBinary(exe)
	if dynamic != (err != nil) {
		t.Errorf("dynamic %v, check error %v", dynamic, err)
	}
}
