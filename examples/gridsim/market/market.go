// Package market holds GridSim's market rules: a battery trading one day of
// hourly day-ahead prices, the money a schedule makes, the exact optimum by
// dynamic programming, and the grade.
//
// Everything is integer arithmetic so that the optimum and a schedule that
// reaches it compare exactly (the optimal schedule grades exactly 1):
//
//   - Prices are whole cents per MWh.
//   - The battery's charge is a whole number of "hours": one hour is the
//     energy one hour of charging at full power puts in (PowerMW MWh).
//   - Action 1 (charge) buys PowerMW MWh at the hour's price; charge +1.
//   - Action -1 (sell) takes one hour of charge out and delivers
//     PowerMW × EfficiencyPct/100 MWh to the grid, paid at the hour's price;
//     charge -1. The whole round-trip loss is taken when selling.
//   - Action 0 (idle) does nothing.
//   - The charge must stay within [0, CapacityHours] after every hour.
//     It starts at StartHours. Charge left at the end of the day is worth
//     nothing.
//
// Money is counted in ten-thousandths of a dollar (hundredths of a cent),
// where both a purchase (PowerMW × cents × 100) and a sale
// (PowerMW × cents × EfficiencyPct) are whole numbers.
package market

import (
	"errors"
	"fmt"
	"strings"
)

// Actions, one per hour.
const (
	Sell   = -1
	Idle   = 0
	Charge = 1
)

// Limits on a day; they keep every sum far inside int64.
const (
	MaxPowerMW      = 10_000
	MaxCapacityHrs  = 24
	MaxAbsPriceCent = 10_000_000 // $100,000/MWh
	MaxHours        = 168
)

// Battery is a battery's size and state at the start of the day.
type Battery struct {
	PowerMW       int // MW; one hour of charging buys PowerMW MWh
	CapacityHours int // charge when full, in hours of charging
	EfficiencyPct int // round-trip efficiency, percent (1..100)
	StartHours    int // charge at the start of the day, in hours of charging
}

// Day is one day of the market: a battery and its hourly prices.
type Day struct {
	Battery
	PricesCents []int64 // price of each hour in cents per MWh
}

// Money is an amount in ten-thousandths of a dollar.
type Money int64

// Dollars returns m in dollars.
func (m Money) Dollars() float64 { return float64(m) / 10_000 }

// String formats m as dollars with cents, rounded half away from zero,
// e.g. "$1234.57" or "-$3.10".
func (m Money) String() string {
	sign := ""
	v := int64(m)
	if v < 0 {
		sign = "-"
		v = -v
	}
	cents := (v + 50) / 100
	return fmt.Sprintf("%s$%d.%02d", sign, cents/100, cents%100)
}

// Check reports the first thing wrong with d's parameters.
func (d Day) Check() error {
	b := d.Battery
	switch {
	case b.PowerMW < 1 || b.PowerMW > MaxPowerMW:
		return fmt.Errorf("power %d MW is outside 1..%d", b.PowerMW, MaxPowerMW)
	case b.CapacityHours < 1 || b.CapacityHours > MaxCapacityHrs:
		return fmt.Errorf("capacity %d hours is outside 1..%d", b.CapacityHours, MaxCapacityHrs)
	case b.EfficiencyPct < 1 || b.EfficiencyPct > 100:
		return fmt.Errorf("efficiency %d%% is outside 1..100", b.EfficiencyPct)
	case b.StartHours < 0 || b.StartHours > b.CapacityHours:
		return fmt.Errorf("starting charge %d hours is outside 0..%d (the capacity)", b.StartHours, b.CapacityHours)
	case len(d.PricesCents) == 0 || len(d.PricesCents) > MaxHours:
		return fmt.Errorf("%d prices: want 1..%d", len(d.PricesCents), MaxHours)
	}
	for h, p := range d.PricesCents {
		if p > MaxAbsPriceCent || p < -MaxAbsPriceCent {
			return fmt.Errorf("price of hour %d (%d cents/MWh) is outside ±%d cents/MWh", h, p, MaxAbsPriceCent)
		}
	}
	return nil
}

// CapacityMWh is the energy the battery holds when full, in MWh.
func (b Battery) CapacityMWh() int { return b.PowerMW * b.CapacityHours }

// StartMWh is the energy held at the start of the day, in MWh.
func (b Battery) StartMWh() int { return b.PowerMW * b.StartHours }

// Gain is the money action a makes in hour h: negative for a purchase at a
// positive price, positive for a sale at a positive price.
func (d Day) Gain(h, a int) Money {
	p := int64(d.PowerMW) * d.PricesCents[h]
	switch a {
	case Charge:
		return Money(-p * 100)
	case Sell:
		return Money(p * int64(d.EfficiencyPct))
	}
	return 0
}

// ErrInvalid is wrapped by every error Validate returns.
var ErrInvalid = errors.New("invalid schedule")

// InvalidError says what is wrong with a schedule, problem by problem.
type InvalidError struct {
	Problems []string
}

func (e *InvalidError) Error() string {
	return "invalid schedule: " + strings.Join(e.Problems, "; ")
}

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// Validate checks a schedule against d: its length, every value in
// {-1, 0, 1}, and the battery's charge staying within [0, capacity]. Its
// error is an *InvalidError naming each value out of range, or else the
// first hour that over-charges or over-sells, with the numbers.
func (d Day) Validate(schedule []int) error {
	n := len(d.PricesCents)
	if len(schedule) != n {
		return &InvalidError{Problems: []string{fmt.Sprintf(
			"it has %d values, but it needs exactly %d, one for each hour 0 to %d", len(schedule), n, n-1)}}
	}
	var bad []string
	for h, a := range schedule {
		if a < Sell || a > Charge {
			bad = append(bad, fmt.Sprintf("hour %d has %d, but each value must be -1 (sell), 0 (idle) or 1 (charge)", h, a))
		}
	}
	if len(bad) > 0 {
		return &InvalidError{Problems: bad}
	}
	s := d.StartHours
	for h, a := range schedule {
		switch next := s + a; {
		case next > d.CapacityHours:
			return &InvalidError{Problems: []string{fmt.Sprintf(
				"hour %d charges, but the battery is already full at the start of hour %d: it holds %d MWh and its capacity is %d MWh",
				h, h, s*d.PowerMW, d.CapacityMWh())}}
		case next < 0:
			return &InvalidError{Problems: []string{fmt.Sprintf(
				"hour %d sells, but the battery is empty at the start of hour %d: it holds 0 MWh and selling for an hour needs %d MWh stored",
				h, h, d.PowerMW)}}
		default:
			s = next
		}
	}
	return nil
}

// Profit is the money a valid schedule makes: sales minus purchases.
// It does not validate; call Validate first.
func (d Day) Profit(schedule []int) Money {
	var m Money
	for h, a := range schedule {
		m += d.Gain(h, a)
	}
	return m
}

// Optimum returns the most money any valid schedule makes on d, and one
// schedule that makes it, found by dynamic programming over the charge
// (hour × charge states). Among equally good actions the schedule prefers
// idling, then selling, then charging, so it is deterministic.
func (d Day) Optimum() (Money, []int) {
	n, k := len(d.PricesCents), d.CapacityHours
	// best[h][s]: the most money from hour h to the end, holding s at the start of h.
	best := make([][]Money, n+1)
	for h := range best {
		best[h] = make([]Money, k+1)
	}
	for h := n - 1; h >= 0; h-- {
		for s := 0; s <= k; s++ {
			best[h][s] = d.bestAction(best[h+1], h, s).value
		}
	}
	schedule := make([]int, n)
	s := d.StartHours
	for h := 0; h < n; h++ {
		c := d.bestAction(best[h+1], h, s)
		schedule[h] = c.action
		s += c.action
	}
	return best[0][d.StartHours], schedule
}

type choice struct {
	action int
	value  Money
}

// bestAction picks hour h's best action at charge s, given the values of
// the next hour (next[s'] = best money from h+1 holding s').
func (d Day) bestAction(next []Money, h, s int) choice {
	c := choice{Idle, next[s]}
	for _, a := range [...]int{Sell, Charge} {
		t := s + a
		if t < 0 || t > d.CapacityHours {
			continue
		}
		if v := d.Gain(h, a) + next[t]; v > c.value {
			c = choice{a, v}
		}
	}
	return c
}

// Grade anchors, as the task's verifier reports them.
const (
	GradeNone = 0.0 // no valid schedule, or one that loses money
	GradeIdle = 0.2 // a schedule that makes exactly nothing (idling all day)
	GradeBest = 1.0 // the optimum
)

// Grade scores a schedule's profit against the day's optimum: 0 for a
// loss, 0.2 for nothing, 0.2 + 0.8 × profit/optimum for a gain, so 1 for
// the optimum. The optimum must be positive (GridSim's days all are).
func Grade(profit, optimum Money) (float64, error) {
	if optimum <= 0 {
		return 0, fmt.Errorf("grading needs a positive optimum, got %s", optimum)
	}
	if profit > optimum {
		return 0, fmt.Errorf("profit %s is above the optimum %s", profit, optimum)
	}
	switch {
	case profit < 0:
		return GradeNone, nil
	case profit == optimum:
		return GradeBest, nil
	}
	// (2·optimum + 8·profit) / (10·optimum) = 0.2 + 0.8·profit/optimum, as
	// one division of exact integers, so the result is correctly rounded.
	return float64(2*optimum+8*profit) / float64(10*optimum), nil
}
