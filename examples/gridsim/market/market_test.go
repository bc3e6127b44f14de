package market

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// bruteForce tries every schedule in {-1,0,1}^n and returns the best
// profit among the valid ones.
func bruteForce(d Day) Money {
	n := len(d.PricesCents)
	schedule := make([]int, n)
	best := Money(0) // idling is always valid
	var walk func(h int)
	walk = func(h int) {
		if h == n {
			if d.Validate(schedule) == nil {
				if p := d.Profit(schedule); p > best {
					best = p
				}
			}
			return
		}
		for a := Sell; a <= Charge; a++ {
			schedule[h] = a
			walk(h + 1)
		}
	}
	walk(0)
	return best
}

func randomDay(r *rand.Rand, hours int) Day {
	k := 1 + r.IntN(4)
	d := Day{
		Battery: Battery{
			PowerMW:       1 + r.IntN(20),
			CapacityHours: k,
			EfficiencyPct: 50 + r.IntN(51),
			StartHours:    r.IntN(k + 1),
		},
		PricesCents: make([]int64, hours),
	}
	for h := range d.PricesCents {
		d.PricesCents[h] = int64(r.IntN(20_000)) - 3_000 // -$30 .. $170
	}
	return d
}

func TestOptimumMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		d := randomDay(r, 1+r.IntN(9))
		if err := d.Check(); err != nil {
			t.Fatalf("case %d: generated a bad day: %v", i, err)
		}
		want := bruteForce(d)
		got, schedule := d.Optimum()
		if got != want {
			t.Fatalf("case %d %+v: DP optimum %d, brute force %d", i, d, got, want)
		}
		if err := d.Validate(schedule); err != nil {
			t.Fatalf("case %d: DP schedule %v is invalid: %v", i, schedule, err)
		}
		if p := d.Profit(schedule); p != got {
			t.Fatalf("case %d: DP schedule %v makes %d, optimum says %d", i, schedule, p, got)
		}
	}
}

func TestOptimumKnownDay(t *testing.T) {
	// 1 MW, 2 hours of capacity, 80% efficiency, empty. Buy at $10 and $20,
	// sell at $100 and $50: -10 - 20 + 0.8*(100+50) = $90.
	d := Day{
		Battery:     Battery{PowerMW: 1, CapacityHours: 2, EfficiencyPct: 80},
		PricesCents: []int64{1000, 2000, 10000, 5000},
	}
	got, schedule := d.Optimum()
	if got != 90*10_000 {
		t.Fatalf("optimum = %s, want $90.00", got)
	}
	want := []int{Charge, Charge, Sell, Sell}
	for h := range want {
		if schedule[h] != want[h] {
			t.Fatalf("schedule = %v, want %v", schedule, want)
		}
	}
	// A negative price pays for charging even if the energy is wasted.
	neg := Day{Battery: Battery{PowerMW: 2, CapacityHours: 1, EfficiencyPct: 90}, PricesCents: []int64{-500, -100}}
	if got, _ := neg.Optimum(); got != 2*500*100 {
		t.Fatalf("negative-price optimum = %s, want $10.00", got)
	}
}

func TestValidate(t *testing.T) {
	d := Day{
		Battery:     Battery{PowerMW: 10, CapacityHours: 2, EfficiencyPct: 90, StartHours: 1},
		PricesCents: []int64{100, 200, 300, 400},
	}
	cases := []struct {
		name     string
		schedule []int
		want     []string // substrings of the error; nil = valid
	}{
		{"idle", []int{0, 0, 0, 0}, nil},
		{"fill then empty", []int{1, -1, -1, 1}, nil},
		{"too short", []int{0, 0, 0}, []string{"it has 3 values", "exactly 4", "hour 0 to 3"}},
		{"too long", []int{0, 0, 0, 0, 0}, []string{"it has 5 values"}},
		{"empty", []int{}, []string{"it has 0 values"}},
		{"out of range", []int{2, 0, -3, 0}, []string{"hour 0 has 2", "hour 2 has -3", "-1 (sell), 0 (idle) or 1 (charge)"}},
		{"over-charge", []int{1, 1, 0, 0}, []string{"hour 1 charges", "already full at the start of hour 1", "holds 20 MWh", "capacity is 20 MWh"}},
		{"over-sell", []int{-1, 0, -1, 0}, []string{"hour 2 sells", "empty at the start of hour 2", "needs 10 MWh"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := d.Validate(c.schedule)
			if c.want == nil {
				if err != nil {
					t.Fatalf("valid schedule refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid schedule %v accepted", c.schedule)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestGradeAnchorsAndBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		d := randomDay(r, 8)
		opt, best := d.Optimum()
		if opt <= 0 {
			continue
		}
		check := func(name string, schedule []int, want float64, exact bool) {
			t.Helper()
			g, err := Grade(d.Profit(schedule), opt)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if g < 0 || g > 1 {
				t.Fatalf("%s: grade %v outside [0,1]", name, g)
			}
			if exact && g != want {
				t.Fatalf("%s: grade %v, want %v", name, g, want)
			}
		}
		check("optimum", best, GradeBest, true)
		check("idle", make([]int, 8), GradeIdle, true)
		// A random valid schedule lands anywhere in [0, 1].
		s := make([]int, 8)
		c := d.StartHours
		for h := range s {
			a := r.IntN(3) - 1
			if c+a < 0 || c+a > d.CapacityHours {
				a = 0
			}
			s[h], c = a, c+a
		}
		check("random", s, 0, false)
	}
	cases := []struct {
		name            string
		profit, optimum Money
		want            float64
		wantErr         string
	}{
		{"loss", -1, 100, 0, ""},
		{"big loss", -1_000_000, 100, 0, ""},
		{"nothing", 0, 100, 0.2, ""},
		{"half", 50, 100, 0.6, ""},
		{"optimum", 100, 100, 1, ""},
		{"zero optimum", 0, 0, 0, "positive optimum"},
		{"above optimum", 101, 100, 0, "above the optimum"},
	}
	for _, c := range cases {
		g, err := Grade(c.profit, c.optimum)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || g != c.want {
			t.Errorf("%s: Grade = %v, %v; want %v", c.name, g, err, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	ok := Day{Battery: Battery{PowerMW: 1, CapacityHours: 1, EfficiencyPct: 90}, PricesCents: []int64{1}}
	cases := []struct {
		name string
		edit func(*Day)
		want string
	}{
		{"ok", func(*Day) {}, ""},
		{"power", func(d *Day) { d.PowerMW = 0 }, "power 0 MW"},
		{"capacity", func(d *Day) { d.CapacityHours = 25 }, "capacity 25 hours"},
		{"efficiency", func(d *Day) { d.EfficiencyPct = 101 }, "efficiency 101%"},
		{"start", func(d *Day) { d.StartHours = 2 }, "starting charge 2 hours"},
		{"no prices", func(d *Day) { d.PricesCents = nil }, "0 prices"},
		{"price", func(d *Day) { d.PricesCents = []int64{MaxAbsPriceCent + 1} }, "price of hour 0"},
	}
	for _, c := range cases {
		d := ok
		c.edit(&d)
		err := d.Check()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Check() = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestMoneyString(t *testing.T) {
	cases := map[Money]string{0: "$0.00", 12_345_678: "$1234.57", -31_000: "-$3.10", 49: "$0.00", 50: "$0.01"}
	for m, want := range cases {
		if got := m.String(); got != want {
			t.Errorf("Money(%d) = %q, want %q", int64(m), got, want)
		}
	}
}
