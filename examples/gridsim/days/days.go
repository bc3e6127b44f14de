// Package days makes GridSim's synthetic market days: hourly day-ahead
// prices shaped like ERCOT's (seasons, morning and evening peaks, wind and
// solar pushing hours below zero, scarcity spikes) and a battery for each.
//
// No real market data is used: every price comes from a seeded generator
// that runs on integers only, so the same seed gives the same bytes on every
// machine and Go version.
package days

//go:generate go run ../cmd/gridsim-gen -out ../tasks/day.seeds.jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/agentenv/agentenv/examples/gridsim/market"
)

// The committed data set: its seed and shape.
const (
	DefaultSeed  = 20190101
	DefaultTrain = 2000
	DefaultEval  = 200
	// EvalEvery: every EvalEvery-th calendar day goes to the eval split, so
	// both splits cover every season.
	EvalEvery = 11
	Hours     = 24
)

// FirstDate is the synthetic calendar's first day. The dates only steer the
// season and weekday patterns; they are not real market days.
var FirstDate = time.Date(2019, time.January, 1, 0, 0, 0, 0, time.UTC)

// Line is one line of tasks/day.seeds.jsonl: one task. Its keys fill the
// placeholders of tasks/day.json.
type Line struct {
	ID            string    `json:"id"`
	Date          string    `json:"date"`
	Weekday       string    `json:"weekday"`
	Season        string    `json:"season"`
	PowerMW       int       `json:"power_mw"`
	CapacityMWh   int       `json:"capacity_mwh"`
	CapacityHours int       `json:"capacity_hours"`
	EfficiencyPct int       `json:"efficiency_pct"`
	SellMWh       Hundreths `json:"sell_mwh"` // MWh delivered by one hour of selling
	StartMWh      int       `json:"start_mwh"`
	StartHours    int       `json:"start_hours"`
	Prices        []Cents   `json:"prices"` // $/MWh, hour 0 to 23
	PriceTable    string    `json:"price_table"`
}

// Cents is a price in cents that reads and writes as dollars with exactly
// two decimals, e.g. 23.40 or -3.05.
type Cents int64

// MarshalJSON writes c as dollars with two decimals.
func (c Cents) MarshalJSON() ([]byte, error) { return []byte(c.String()), nil }

// String formats c as dollars with two decimals, without a currency sign.
func (c Cents) String() string {
	v, sign := int64(c), ""
	if v < 0 {
		v, sign = -v, "-"
	}
	return fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
}

// UnmarshalJSON reads a JSON number with at most two decimals.
func (c *Cents) UnmarshalJSON(b []byte) error {
	v, err := ParseCents(string(b))
	if err != nil {
		return err
	}
	*c = Cents(v)
	return nil
}

// ParseCents reads a decimal number of dollars with at most two decimals
// ("23.4", "-3.05", "12") exactly into cents.
func ParseCents(s string) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("price %q is not a number", s)
	}
	return CentsOf(f)
}

// CentsOf converts dollars read from JSON into whole cents, refusing a
// value with more than two decimals or beyond the market's limits.
func CentsOf(dollars float64) (int64, error) {
	scaled := dollars * 100
	if math.IsNaN(scaled) || scaled > market.MaxAbsPriceCent || scaled < -market.MaxAbsPriceCent {
		return 0, fmt.Errorf("price %v is outside ±%d $/MWh", dollars, market.MaxAbsPriceCent/100)
	}
	r := int64(math.Round(scaled))
	if d := scaled - float64(r); d > 1e-6 || d < -1e-6 {
		return 0, fmt.Errorf("price %v has more than two decimals (prices are whole cents per MWh)", dollars)
	}
	return r, nil
}

// Hundreths is a quantity in hundredths that writes as its shortest
// decimal: 880 → 8.8, 88 → 0.88, 1000 → 10.
type Hundreths int64

// MarshalJSON writes h as a decimal number.
func (h Hundreths) MarshalJSON() ([]byte, error) {
	s := Cents(h).String()
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return []byte(s), nil
}

// UnmarshalJSON reads a decimal number with at most two decimals.
func (h *Hundreths) UnmarshalJSON(b []byte) error {
	v, err := ParseCents(string(b))
	if err != nil {
		return fmt.Errorf("sell_mwh: %w", err)
	}
	*h = Hundreths(v)
	return nil
}

// Day returns the market day this line describes.
func (l Line) Day() market.Day {
	d := market.Day{
		Battery: market.Battery{
			PowerMW:       l.PowerMW,
			CapacityHours: l.CapacityHours,
			EfficiencyPct: l.EfficiencyPct,
			StartHours:    l.StartHours,
		},
		PricesCents: make([]int64, len(l.Prices)),
	}
	for h, p := range l.Prices {
		d.PricesCents[h] = int64(p)
	}
	return d
}

// PriceTable formats prices one hour a line: "hour 0: 23.40".
func PriceTable(prices []Cents) string {
	var b strings.Builder
	for h, p := range prices {
		if h > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "hour %d: %s", h, p)
	}
	return b.String()
}

// Generate makes the data set: train days then eval days, each in
// calendar order. Calendar day i goes to eval when i%EvalEvery ==
// EvalEvery-1 (until eval is full), else to train.
func Generate(seed uint64, train, eval int) ([]Line, error) {
	if train < 0 || eval < 0 || train+eval == 0 {
		return nil, fmt.Errorf("want a positive number of days, got %d train and %d eval", train, eval)
	}
	var trainLines, evalLines []Line
	for i := 0; len(trainLines) < train || len(evalLines) < eval; i++ {
		toEval := len(evalLines) < eval && (i%EvalEvery == EvalEvery-1 || len(trainLines) == train)
		if !toEval && len(trainLines) == train {
			continue
		}
		date := FirstDate.AddDate(0, 0, i)
		l, err := makeDay(seed, i, date)
		if err != nil {
			return nil, err
		}
		if toEval {
			l.ID = fmt.Sprintf("eval-%0*d", width(eval), len(evalLines)+1)
			evalLines = append(evalLines, l)
		} else {
			l.ID = fmt.Sprintf("train-%0*d", width(train), len(trainLines)+1)
			trainLines = append(trainLines, l)
		}
	}
	return append(trainLines, evalLines...), nil
}

// width is the number of digits ids of a split of n need (at least 3).
func width(n int) int {
	w := len(strconv.Itoa(n))
	if w < 3 {
		w = 3
	}
	return w
}

// Encode writes lines as JSON Lines.
func Encode(lines []Line) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return nil, fmt.Errorf("encoding day %s: %w", l.ID, err)
		}
	}
	return b.Bytes(), nil
}

// makeDay draws calendar day i's prices and battery from its own stream,
// drawing again while the day's optimum is not positive (GridSim grades
// against the optimum, so it must be above zero).
func makeDay(seed uint64, i int, date time.Time) (Line, error) {
	r := newStream(seed, uint64(i))
	for try := 0; try < 100; try++ {
		prices := drawPrices(r, date)
		bat := drawBattery(r)
		l := Line{
			Date:          date.Format("2006-01-02"),
			Weekday:       date.Weekday().String(),
			Season:        seasonOf(date.Month()).name,
			PowerMW:       bat.PowerMW,
			CapacityMWh:   bat.CapacityMWh(),
			CapacityHours: bat.CapacityHours,
			EfficiencyPct: bat.EfficiencyPct,
			SellMWh:       Hundreths(bat.PowerMW * bat.EfficiencyPct),
			StartMWh:      bat.StartMWh(),
			StartHours:    bat.StartHours,
			Prices:        prices,
			PriceTable:    PriceTable(prices),
		}
		d := l.Day()
		if err := d.Check(); err != nil {
			return Line{}, fmt.Errorf("day %s: generated a bad day: %w", l.Date, err)
		}
		if opt, _ := d.Optimum(); opt > 0 {
			return l, nil
		}
	}
	return Line{}, fmt.Errorf("day %s: no day with a positive optimum in 100 draws", date.Format("2006-01-02"))
}
