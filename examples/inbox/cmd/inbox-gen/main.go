// Command inbox-gen writes the inbox example's synthetic mailbox and its
// seeded task family. The committed files are exactly what
//
//	go run ./cmd/inbox-gen
//
// writes, run in examples/inbox (or `go generate ./mailbox`): a test
// checks that it still reproduces both byte for byte.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentenv/agentenv/examples/inbox/mailbox"
	"github.com/agentenv/agentenv/sdk/atomicfile"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "inbox-gen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("inbox-gen", flag.ContinueOnError)
	seed := fs.Uint64("seed", mailbox.DefaultSeed, "generator seed")
	dir := fs.String("dir", ".", "the bundle folder: writes mailbox/mailbox.json and tasks/invoice.seeds.jsonl under it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (the flags are -seed and -dir)", fs.Arg(0))
	}
	box, family, err := mailbox.Generate(*seed)
	if err != nil {
		return err
	}
	boxJSON, err := mailbox.Encode(box)
	if err != nil {
		return err
	}
	seeds, err := mailbox.EncodeSeeds(family)
	if err != nil {
		return err
	}
	// Check both folders before writing either, so a wrong -dir writes
	// nothing.
	files := []struct {
		path string
		data []byte
	}{
		{filepath.Join(*dir, "mailbox", "mailbox.json"), boxJSON},
		{filepath.Join(*dir, "tasks", "invoice.seeds.jsonl"), seeds},
	}
	for _, f := range files {
		if st, err := os.Stat(filepath.Dir(f.path)); err != nil || !st.IsDir() {
			return fmt.Errorf("%s is not a folder: run inbox-gen in examples/inbox, or give -dir examples/inbox", filepath.Dir(f.path))
		}
	}
	for _, f := range files {
		if err := atomicfile.Write(f.path, f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
