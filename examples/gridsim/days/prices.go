package days

import (
	"time"

	"github.com/agentenv/agentenv/examples/gridsim/market"
)

// stream is a splitmix64 generator: tiny, fully specified, and the same on
// every platform, unlike anything whose algorithm a library may change.
type stream struct{ s uint64 }

// newStream gives calendar day i of a seed its own stream, so drawing one
// day again never shifts another.
func newStream(seed, i uint64) *stream {
	mixed := (&stream{s: seed}).next()
	return &stream{s: mixed ^ (i+1)*0xd1b54a32d192ed03}
}

func (r *stream) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// between returns an integer in [lo, hi]. The modulo bias is below 2^-40
// for the small ranges used here.
func (r *stream) between(lo, hi int64) int64 {
	return lo + int64(r.next()%uint64(hi-lo+1))
}

// chance is true with probability permille/1000.
func (r *stream) chance(permille int64) bool { return r.between(0, 999) < permille }

// pick returns one of choices, each as likely as its weight.
func pick[T any](r *stream, choices []T, weights []int64) T {
	var total int64
	for _, w := range weights {
		total += w
	}
	x := r.between(0, total-1)
	for i, w := range weights {
		if x < w {
			return choices[i]
		}
		x -= w
	}
	return choices[len(choices)-1]
}

// season holds one season's price shape. Amounts are cents per MWh;
// probabilities are per mille.
type season struct {
	name string
	// profile is a typical weekday's hourly price before the day's level,
	// peak, wind, solar and noise: ERCOT's morning and evening peaks.
	profile [Hours]int64
	// heat: chance of a day whose peaks are much steeper (heat wave, cold snap).
	heat int64
	// solarMax: the largest midday dip solar output gives.
	solarMax int64
	// windy: chance of a windy night; windMax: its largest dip.
	windy, windMax int64
	// spike: chance of a scarcity event; spikeHours: where it may start.
	spike      int64
	spikeHours []int
}

var (
	winter = season{
		name: "winter",
		profile: [Hours]int64{2400, 2300, 2250, 2250, 2350, 2700, 3400, 4200, 4300, 3800, 3400, 3100,
			2950, 2850, 2800, 2900, 3200, 4000, 4800, 4700, 4300, 3800, 3200, 2700},
		heat: 80, solarMax: 1200, windy: 300, windMax: 4000,
		spike: 40, spikeHours: []int{6, 7, 18, 19},
	}
	spring = season{
		name: "spring",
		profile: [Hours]int64{2200, 2100, 2050, 2050, 2150, 2450, 2900, 3200, 2900, 2500, 2200, 2000,
			1900, 1850, 1900, 2100, 2600, 3300, 4300, 5200, 4800, 3900, 3000, 2500},
		heat: 60, solarMax: 3500, windy: 450, windMax: 4500,
		spike: 20, spikeHours: []int{18, 19, 20},
	}
	summer = season{
		name: "summer",
		profile: [Hours]int64{2800, 2600, 2500, 2450, 2500, 2700, 3000, 3200, 3300, 3500, 3800, 4200,
			4700, 5300, 6200, 7400, 8800, 9800, 9500, 7800, 6000, 4600, 3700, 3100},
		heat: 150, solarMax: 2500, windy: 150, windMax: 3000,
		spike: 70, spikeHours: []int{16, 17, 18, 19},
	}
	fall = season{
		name: "fall",
		profile: [Hours]int64{2400, 2300, 2250, 2250, 2350, 2650, 3200, 3700, 3500, 3100, 2800, 2650,
			2600, 2600, 2700, 2900, 3400, 4300, 5100, 4900, 4300, 3600, 3000, 2650},
		heat: 50, solarMax: 1800, windy: 350, windMax: 4000,
		spike: 20, spikeHours: []int{17, 18, 19},
	}
)

func seasonOf(m time.Month) season {
	switch m {
	case time.December, time.January, time.February:
		return winter
	case time.March, time.April, time.May:
		return spring
	case time.June, time.July, time.August, time.September:
		return summer
	}
	return fall
}

// Weights (percent) of the solar dip for hours 9 to 17 and of the wind dip
// by hour (night and late evening).
var (
	solarShape = map[int]int64{9: 20, 10: 50, 11: 80, 12: 100, 13: 100, 14: 90, 15: 70, 16: 40, 17: 15}
	windShape  = map[int]int64{0: 100, 1: 100, 2: 100, 3: 100, 4: 100, 5: 90, 6: 70, 7: 50, 21: 50, 22: 80, 23: 90}
)

// Price bounds: ERCOT's offer cap, and a floor below which even windy
// nights rarely go in the day-ahead market.
const (
	capCents   = 500_000
	floorCents = -4_000
)

// drawPrices draws one day's 24 hourly prices in cents per MWh.
func drawPrices(r *stream, date time.Time) []Cents {
	s := seasonOf(date.Month())
	// The day's level (fuel price, load) and how steep its peaks are.
	level := r.between(700, 1300)
	if r.chance(100) {
		level = r.between(1300, 2000) // a tight day
	}
	if wd := date.Weekday(); wd == time.Saturday || wd == time.Sunday {
		level = level * 880 / 1000
	}
	peak := r.between(600, 1600)
	if r.chance(s.heat) {
		peak = r.between(1600, 2600)
	}
	var low int64 = 1 << 62
	for _, p := range s.profile {
		low = min(low, p)
	}
	solar := r.between(s.solarMax/5, s.solarMax)
	if r.chance(250) {
		solar /= 3 // a cloudy day
	}
	var wind int64
	if r.chance(s.windy) {
		wind = r.between(500, s.windMax)
	}

	prices := make([]int64, Hours)
	for h := range prices {
		p := (low + (s.profile[h]-low)*peak/1000) * level / 1000
		p -= solar * solarShape[h] / 100
		p -= wind * windShape[h] / 100
		// Noise: up to ±8% of the price and ±$1.50.
		mag := p
		if mag < 0 {
			mag = -mag
		}
		p += mag*r.between(-80, 80)/1000 + r.between(-150, 150)
		prices[h] = p
	}

	if r.chance(s.spike) {
		addSpike(r, s, prices)
	}
	out := make([]Cents, Hours)
	for h, p := range prices {
		out[h] = Cents(max(floorCents, min(capCents, p)))
	}
	return out
}

// addSpike puts a scarcity event of one to three hours on the day's peak:
// $250 to $3,000, or the $5,000 cap one time in ten, with the hours beside
// it raised halfway.
func addSpike(r *stream, s season, prices []int64) {
	start := s.spikeHours[r.between(0, int64(len(s.spikeHours))-1)]
	length := int(r.between(1, 3))
	height := r.between(25_000, 300_000)
	if r.chance(100) {
		height = capCents
	}
	for h := start; h < start+length && h < Hours; h++ {
		prices[h] = max(prices[h], height-r.between(0, height/5))
	}
	for _, h := range []int{start - 1, start + length} {
		if h >= 0 && h < Hours {
			prices[h] = max(prices[h], (prices[h]+height)/2)
		}
	}
}

// drawBattery draws the day's battery: 1 to 100 MW, one to six hours of
// storage, 75% to 95% round-trip efficiency, usually starting empty.
func drawBattery(r *stream) market.Battery {
	b := market.Battery{
		PowerMW:       pick(r, []int{1, 2, 5, 10, 20, 50, 100}, []int64{10, 10, 20, 25, 15, 12, 8}),
		CapacityHours: pick(r, []int{1, 2, 3, 4, 6}, []int64{15, 30, 20, 25, 10}),
		EfficiencyPct: int(r.between(75, 95)),
	}
	switch x := r.between(0, 99); {
	case x < 60:
		b.StartHours = 0
	case x < 85:
		b.StartHours = 1
	default:
		b.StartHours = int(r.between(0, int64(b.CapacityHours)))
	}
	return b
}
