// Command gridsim-gen writes GridSim's synthetic days as the bundle's seeds
// file, one task a line. The committed tasks/day.seeds.jsonl is exactly
//
//	go run ./cmd/gridsim-gen -out tasks/day.seeds.jsonl
//
// run in examples/gridsim (or `go generate ./days`); a test checks that it
// still reproduces the committed file byte for byte.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentenv/agentenv/examples/gridsim/days"
	"github.com/agentenv/agentenv/sdk/atomicfile"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gridsim-gen:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gridsim-gen", flag.ContinueOnError)
	seed := fs.Uint64("seed", days.DefaultSeed, "generator seed")
	train := fs.Int("train", days.DefaultTrain, "train days (ids train-NNNN)")
	eval := fs.Int("eval", days.DefaultEval, "eval days (ids eval-NNN)")
	out := fs.String("out", "", `file to write ("-" for stdout)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-out is required (a file, or - for stdout)")
	}
	lines, err := days.Generate(*seed, *train, *eval)
	if err != nil {
		return err
	}
	data, err := days.Encode(lines)
	if err != nil {
		return err
	}
	if *out == "-" {
		_, err := stdout.Write(data)
		return err
	}
	return atomicfile.Write(*out, data, 0o644)
}
