// Package baseline holds GridSim's scripted policies and plays them
// through an env the way a model plays: read the prices with get_prices,
// submit a schedule with submit_schedule.
package baseline

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/agentenv/agentenv/examples/gridsim/market"
)

// Policy decides a day's schedule from the battery and prices.
type Policy interface {
	Name() string
	// Schedule returns a valid schedule for d. taskID seeds any
	// randomness, so a policy plays a task the same way every time.
	Schedule(d market.Day, taskID string) []int
}

// Names lists the policies, best first.
var Names = []string{"optimal", "greedy", "random", "idle"}

// ByName returns the policy of that name.
func ByName(name string) (Policy, error) {
	switch name {
	case "optimal":
		return Optimal{}, nil
	case "greedy":
		return Greedy{}, nil
	case "idle":
		return Idle{}, nil
	case "random":
		return Random{}, nil
	}
	return nil, fmt.Errorf("unknown policy %q (policies: %s)", name, strings.Join(Names, ", "))
}

// Optimal plays the day's exact optimum: it grades 1.
type Optimal struct{}

func (Optimal) Name() string { return "optimal" }

func (Optimal) Schedule(d market.Day, _ string) []int {
	_, s := d.Optimum()
	return s
}

// Idle never trades: it grades 0.2.
type Idle struct{}

func (Idle) Name() string { return "idle" }

func (Idle) Schedule(d market.Day, _ string) []int { return make([]int, len(d.PricesCents)) }

// Random picks each hour uniformly among the actions the battery allows
// at that point, seeded by the task id.
type Random struct{}

func (Random) Name() string { return "random" }

func (Random) Schedule(d market.Day, taskID string) []int {
	h := fnv.New64a()
	h.Write([]byte(taskID))
	r := rand.New(rand.NewPCG(h.Sum64(), 0x6772696473696d)) // "gridsim"
	s := make([]int, len(d.PricesCents))
	charge := d.StartHours
	for hour := range s {
		var allowed []int
		for a := market.Sell; a <= market.Charge; a++ {
			if next := charge + a; next >= 0 && next <= d.CapacityHours {
				allowed = append(allowed, a)
			}
		}
		s[hour] = allowed[r.IntN(len(allowed))]
		charge += s[hour]
	}
	return s
}

// Greedy is the rule "charge the cheapest hours, sell the dearest later
// ones", one trade at a time. The trades it may make are: a pair (charge
// in hour i, sell in a later hour j), a sale of the starting charge in hour
// j, or a purchase alone at a negative price. It takes them widest margin
// first (money made; ties in a fixed order), each only if it makes money,
// its hours are still idle, and the battery stays within its limits.
// It never looks at how trades combine, so it can miss the optimum, e.g.
// by spending the best selling hour on a pair when the starting charge
// could have used it.
type Greedy struct{}

func (Greedy) Name() string { return "greedy" }

type trade struct {
	buy, sell int // hours; -1 = none
	margin    market.Money
}

func (Greedy) Schedule(d market.Day, _ string) []int {
	n := len(d.PricesCents)
	var trades []trade
	for j := 0; j < n; j++ {
		trades = append(trades, trade{-1, j, d.Gain(j, market.Sell)})
		trades = append(trades, trade{j, -1, d.Gain(j, market.Charge)})
		for i := 0; i < j; i++ {
			trades = append(trades, trade{i, j, d.Gain(i, market.Charge) + d.Gain(j, market.Sell)})
		}
	}
	sort.SliceStable(trades, func(a, b int) bool { return trades[a].margin > trades[b].margin })
	s := make([]int, n)
	for _, t := range trades {
		if t.margin <= 0 {
			break
		}
		if (t.buy >= 0 && s[t.buy] != market.Idle) || (t.sell >= 0 && s[t.sell] != market.Idle) {
			continue
		}
		set(s, t, market.Charge, market.Sell)
		if d.Validate(s) != nil {
			set(s, t, market.Idle, market.Idle)
		}
	}
	return s
}

func set(s []int, t trade, buy, sell int) {
	if t.buy >= 0 {
		s[t.buy] = buy
	}
	if t.sell >= 0 {
		s[t.sell] = sell
	}
}
