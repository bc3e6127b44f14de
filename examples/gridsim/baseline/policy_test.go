package baseline

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/examples/gridsim/days"
	"github.com/agentenv/agentenv/examples/gridsim/market"
)

// Every policy gives a valid schedule on every day of the data set, and
// the grades keep their order: optimal 1 ≥ greedy; idle exactly 0.2.
func TestPoliciesOnEveryDay(t *testing.T) {
	lines, err := days.Generate(days.DefaultSeed, days.DefaultTrain, days.DefaultEval)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{}
	for _, l := range lines {
		d := l.Day()
		opt, _ := d.Optimum()
		for _, name := range Names {
			p, err := ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			s := p.Schedule(d, l.ID)
			if err := d.Validate(s); err != nil {
				t.Fatalf("%s on %s: %v", name, l.ID, err)
			}
			g, err := market.Grade(d.Profit(s), opt)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case name == "optimal" && g != 1, name == "idle" && g != 0.2:
				t.Fatalf("%s on %s graded %v", name, l.ID, g)
			}
			sums[name] += g
		}
	}
	n := float64(len(lines))
	t.Logf("mean grades over %d days: optimal %.4f greedy %.4f random %.4f idle %.4f",
		len(lines), sums["optimal"]/n, sums["greedy"]/n, sums["random"]/n, sums["idle"]/n)
	if !(sums["greedy"] > sums["idle"] && sums["idle"] > sums["random"]) {
		t.Errorf("grade order broken: %v", sums)
	}
}

func TestGreedyKnownDays(t *testing.T) {
	cases := []struct {
		name   string
		bat    market.Battery
		prices []int64
		want   []int
	}{
		{"buy low sell high", market.Battery{PowerMW: 1, CapacityHours: 1, EfficiencyPct: 90},
			[]int64{1000, 500, 3000, 2000}, []int{0, 1, -1, 0}},
		{"margin too thin", market.Battery{PowerMW: 1, CapacityHours: 1, EfficiencyPct: 80},
			[]int64{1000, 1100, 1200}, []int{0, 0, 0}},
		{"sells the starting charge", market.Battery{PowerMW: 1, CapacityHours: 1, EfficiencyPct: 90, StartHours: 1},
			[]int64{3000, 1000, 1000}, []int{-1, 0, 0}},
		{"paid to charge", market.Battery{PowerMW: 1, CapacityHours: 1, EfficiencyPct: 90},
			[]int64{2000, -500, -100}, []int{0, 1, 0}},
		{"two pairs in a row", market.Battery{PowerMW: 1, CapacityHours: 1, EfficiencyPct: 100},
			[]int64{100, 900, 200, 800}, []int{1, -1, 1, -1}},
	}
	for _, c := range cases {
		d := market.Day{Battery: c.bat, PricesCents: c.prices}
		if got := (Greedy{}).Schedule(d, "x"); !slices.Equal(got, c.want) {
			t.Errorf("%s: greedy = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRandomIsSeededByTask(t *testing.T) {
	d := market.Day{Battery: market.Battery{PowerMW: 1, CapacityHours: 3, EfficiencyPct: 90}, PricesCents: make([]int64, 24)}
	a, b, c := Random{}.Schedule(d, "day/eval-001"), Random{}.Schedule(d, "day/eval-001"), Random{}.Schedule(d, "day/eval-002")
	if !slices.Equal(a, b) {
		t.Errorf("same task, different schedules: %v, %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("different tasks, same schedule: %v", a)
	}
}

func TestByName(t *testing.T) {
	for _, n := range Names {
		p, err := ByName(n)
		if err != nil || p.Name() != n {
			t.Errorf("ByName(%q) = %v, %v", n, p, err)
		}
	}
	if _, err := ByName("smart"); err == nil || !strings.Contains(err.Error(), "optimal, greedy") {
		t.Errorf("ByName(smart) error = %v", err)
	}
}
