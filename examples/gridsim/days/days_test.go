package days

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

const committed = "../tasks/day.seeds.jsonl"

// The committed seeds file is exactly what the generator writes.
func TestCommittedFileIsReproduced(t *testing.T) {
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := Generate(DefaultSeed, DefaultTrain, DefaultEval)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Encode(lines)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("generator output (%d bytes) differs from %s (%d bytes) at byte %d; regenerate with `go generate ./days` and commit",
			len(got), committed, len(want), i)
	}
}

func TestDataSetShape(t *testing.T) {
	f, err := os.Open(committed)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	ids := map[string]bool{}
	seasons := map[string]int{}
	var train, eval, negative, spikes, hours int
	for n := 1; sc.Scan(); n++ {
		var l Line
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if ids[l.ID] {
			t.Fatalf("line %d: duplicate id %s", n, l.ID)
		}
		ids[l.ID] = true
		switch {
		case strings.HasPrefix(l.ID, "train-") && len(l.ID) == len("train-0001"):
			train++
		case strings.HasPrefix(l.ID, "eval-") && len(l.ID) == len("eval-001"):
			eval++
		default:
			t.Fatalf("line %d: id %q is neither train-NNNN nor eval-NNN", n, l.ID)
		}
		seasons[l.Season]++
		d := l.Day()
		if err := d.Check(); err != nil {
			t.Fatalf("line %d (%s): %v", n, l.ID, err)
		}
		if len(d.PricesCents) != Hours {
			t.Fatalf("line %d: %d prices", n, len(d.PricesCents))
		}
		if opt, _ := d.Optimum(); opt <= 0 {
			t.Fatalf("line %d (%s): optimum %s is not positive", n, l.ID, opt)
		}
		if l.CapacityMWh != l.PowerMW*l.CapacityHours || l.StartMWh != l.PowerMW*l.StartHours ||
			int64(l.SellMWh) != int64(l.PowerMW*l.EfficiencyPct) || l.PriceTable != PriceTable(l.Prices) {
			t.Fatalf("line %d (%s): derived fields disagree: %+v", n, l.ID, l)
		}
		for _, p := range l.Prices {
			hours++
			if p < 0 {
				negative++
			}
			if p >= 25_000 {
				spikes++
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if train != DefaultTrain || eval != DefaultEval {
		t.Fatalf("%d train and %d eval days, want %d and %d", train, eval, DefaultTrain, DefaultEval)
	}
	for _, s := range []string{"winter", "spring", "summer", "fall"} {
		if seasons[s] < 200 {
			t.Errorf("only %d %s days", seasons[s], s)
		}
	}
	// ERCOT-like: some negative hours, a few scarcity hours, neither common.
	if negative < hours/100 || negative > hours/8 {
		t.Errorf("%d of %d hours negative", negative, hours)
	}
	if spikes < 50 || spikes > hours/50 {
		t.Errorf("%d of %d hours at $250 or more", spikes, hours)
	}
}

func TestGenerateSplits(t *testing.T) {
	cases := []struct {
		train, eval int
		wantErr     bool
		first, last string
	}{
		{3, 2, false, "train-001", "eval-002"},
		{0, 5, false, "eval-001", "eval-005"},
		{12, 0, false, "train-001", "train-012"},
		{0, 0, true, "", ""},
		{-1, 3, true, "", ""},
	}
	for _, c := range cases {
		lines, err := Generate(7, c.train, c.eval)
		if c.wantErr {
			if err == nil {
				t.Errorf("Generate(%d, %d) succeeded", c.train, c.eval)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Generate(%d, %d): %v", c.train, c.eval, err)
		}
		if len(lines) != c.train+c.eval || lines[0].ID != c.first || lines[len(lines)-1].ID != c.last {
			t.Errorf("Generate(%d, %d): %d lines from %s to %s", c.train, c.eval, len(lines), lines[0].ID, lines[len(lines)-1].ID)
		}
	}
	// A different seed gives different days.
	a, _ := Generate(1, 1, 0)
	b, _ := Generate(2, 1, 0)
	if a[0].PriceTable == b[0].PriceTable {
		t.Error("seeds 1 and 2 gave the same day")
	}
}

func TestCents(t *testing.T) {
	cases := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"23.40", 2340, ""},
		{"23.4", 2340, ""},
		{"-3.05", -305, ""},
		{"0", 0, ""},
		{"5000", 500000, ""},
		{"0.07", 7, ""},
		{"12.345", 0, "more than two decimals"},
		{"1e9", 0, "outside"},
		{"abc", 0, "not a number"},
	}
	for _, c := range cases {
		got, err := ParseCents(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseCents(%q) = %d, %v; want error %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseCents(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if back := Cents(got).String(); c.in == back {
			continue
		} else if again, _ := ParseCents(back); again != got {
			t.Errorf("Cents(%d) = %q reads back as %d", got, back, again)
		}
	}
	for h, want := range map[Hundreths]string{880: "8.8", 88: "0.88", 1000: "10", 9300: "93", 445: "4.45"} {
		if got, _ := h.MarshalJSON(); string(got) != want {
			t.Errorf("Hundreths(%d) = %s, want %s", int64(h), got, want)
		}
	}
}
