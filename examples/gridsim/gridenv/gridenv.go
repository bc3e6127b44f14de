// Package gridenv is GridSim's env: an MCP server holding one market day
// for one episode. Its tools:
//
//   - load_day (hidden setup): loads the day's battery and prices.
//   - get_prices (the model's): the day's battery and prices as JSON.
//   - submit_schedule (the model's): 24 actions in {-1,0,1}; a malformed
//     schedule is refused with what is wrong, so the model can retry.
//   - grade (hidden verifier): the grade of the last valid schedule, as a
//     bare number: 0 with none.
//
// One env process serves one episode at a time, so the state is the
// process's: every MCP session sees the same day (load_day replaces it).
// With a reset tool named (ResetTool; a bundle with reuse = N has agentenv
// name it in AGENTENV_RESET_TOOL) it also serves that tool, which drops
// the day, the schedule and the counts, so the next episode on the same
// process starts as a fresh one would.
package gridenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/examples/gridsim/days"
	"github.com/agentenv/agentenv/examples/gridsim/market"
)

// Tool names.
const (
	ToolLoadDay  = "load_day"
	ToolPrices   = "get_prices"
	ToolSubmit   = "submit_schedule"
	ToolGrade    = "grade"
	ServerName   = "gridsim"
	ServerVerion = "1.0.0"
)

// LoadDay is load_day's arguments: the keys of a seeds line.
type LoadDay struct {
	Date          string    `json:"date,omitempty" jsonschema:"the day's date, for the record"`
	PowerMW       int       `json:"power_mw" jsonschema:"battery power in MW"`
	CapacityMWh   int       `json:"capacity_mwh" jsonschema:"battery capacity in MWh, a multiple of power_mw"`
	EfficiencyPct int       `json:"efficiency_pct" jsonschema:"round-trip efficiency in percent"`
	StartMWh      int       `json:"start_mwh" jsonschema:"charge at the start of the day in MWh, a multiple of power_mw"`
	Prices        []float64 `json:"prices" jsonschema:"24 hourly prices in $/MWh with at most two decimals"`
}

// Day is get_prices's answer.
type Day struct {
	Date          string    `json:"date,omitempty"`
	Hours         int       `json:"hours"`
	PowerMW       int       `json:"power_mw"`
	CapacityMWh   int       `json:"capacity_mwh"`
	EfficiencyPct int       `json:"efficiency_pct"`
	SellMWh       float64   `json:"sell_mwh"`
	StartMWh      int       `json:"start_mwh"`
	Prices        []float64 `json:"prices"`
}

// Env is the env's state: the day loaded and the last valid schedule.
type Env struct {
	log hclog.Logger
	// ResetTool, when set before Server, names the reset tool it serves.
	ResetTool string

	mu        sync.Mutex
	day       *market.Day
	date      string
	optimum   market.Money
	last      []int // last valid schedule; nil = none
	submitted int   // valid submissions
	rejected  int
}

// New returns an env with no day loaded.
func New(log hclog.Logger) *Env {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Env{log: log}
}

var submitSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "schedule": {
      "type": "array",
      "items": {"type": "integer"},
      "description": "24 integers, one per hour from hour 0 to hour 23: 1 = charge for the hour, -1 = sell for the hour, 0 = idle"
    }
  },
  "required": ["schedule"],
  "additionalProperties": false
}`)

// Server returns an MCP server offering the env's tools.
func (e *Env) Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: ServerVerion}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolLoadDay,
		Description: "Setup: load the day's battery and hourly prices. Replaces any day loaded before.",
	}, e.loadDay)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolPrices,
		Description: "Read today's 24 hourly day-ahead prices ($/MWh, hour 0 to 23) and the battery: power (MW), capacity (MWh), round-trip efficiency (%), MWh delivered by one hour of selling, and charge at the start of the day (MWh).",
	}, e.getPrices)
	// submit_schedule reads its own arguments (the SDK checks no schema for
	// it) so every malformed schedule gets GridSim's message, hour by hour.
	s.AddTool(&mcp.Tool{
		Name:        ToolSubmit,
		Description: "Submit the day's schedule: 24 integers, one per hour from hour 0 to 23, each 1 (charge at full power for the hour), -1 (sell at full power for the hour) or 0 (idle). The battery's charge must stay between empty and full. A malformed schedule is refused with the reason; you may submit again, and the last valid schedule is the one that counts.",
		InputSchema: submitSchema,
	}, e.submit)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolGrade,
		Description: "Verifier: the grade of the last valid schedule against the day's optimum, from 0 to 1 (0 with none).",
	}, e.grade)
	if e.ResetTool != "" {
		s.AddTool(&mcp.Tool{
			Name:        e.ResetTool,
			Description: "Reset the env for the next episode: no day loaded, no schedule.",
			InputSchema: json.RawMessage(`{"type":"object"}`),
		}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			e.Reset()
			return textResult("reset"), nil
		})
	}
	return s
}

// Reset drops the day, the last schedule and the counts: all the state
// an episode leaves.
func (e *Env) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.day, e.date, e.optimum = nil, "", 0
	e.last, e.submitted, e.rejected = nil, 0, 0
}

// Handler serves the env's MCP server over streamable HTTP; mount it at /mcp.
func (e *Env) Handler() http.Handler {
	s := e.Server()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

func textResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func (e *Env) loadDay(_ context.Context, _ *mcp.CallToolRequest, in LoadDay) (*mcp.CallToolResult, any, error) {
	d, err := in.day()
	if err != nil {
		e.log.Warn("load_day refused", "error", err)
		return nil, nil, fmt.Errorf("load_day: %w", err)
	}
	opt, _ := d.Optimum()
	if opt <= 0 {
		return nil, nil, fmt.Errorf("load_day: this day's best schedule makes %s; GridSim grades against a positive optimum", opt)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.day, e.date, e.optimum = &d, in.Date, opt
	e.last, e.submitted, e.rejected = nil, 0, 0
	e.log.Info("day loaded", "date", in.Date, "power_mw", d.PowerMW, "capacity_hours", d.CapacityHours,
		"efficiency_pct", d.EfficiencyPct, "start_hours", d.StartHours)
	return textResult("loaded day %s: %d hours, %d MW, %d MWh, %d%% efficiency, starting with %d MWh",
		orDash(in.Date), len(d.PricesCents), d.PowerMW, d.CapacityMWh(), d.EfficiencyPct, d.StartMWh()), nil, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// day checks load_day's arguments and converts them to a market day.
func (in LoadDay) day() (market.Day, error) {
	if in.PowerMW < 1 {
		return market.Day{}, fmt.Errorf("power_mw is %d; it must be at least 1", in.PowerMW)
	}
	if in.CapacityMWh%in.PowerMW != 0 || in.CapacityMWh < in.PowerMW {
		return market.Day{}, fmt.Errorf("capacity_mwh %d is not a positive multiple of power_mw %d", in.CapacityMWh, in.PowerMW)
	}
	if in.StartMWh%in.PowerMW != 0 || in.StartMWh < 0 {
		return market.Day{}, fmt.Errorf("start_mwh %d is not a multiple of power_mw %d (zero included)", in.StartMWh, in.PowerMW)
	}
	if len(in.Prices) != days.Hours {
		return market.Day{}, fmt.Errorf("prices has %d values; a day has %d", len(in.Prices), days.Hours)
	}
	d := market.Day{
		Battery: market.Battery{
			PowerMW:       in.PowerMW,
			CapacityHours: in.CapacityMWh / in.PowerMW,
			EfficiencyPct: in.EfficiencyPct,
			StartHours:    in.StartMWh / in.PowerMW,
		},
		PricesCents: make([]int64, len(in.Prices)),
	}
	for h, p := range in.Prices {
		c, err := days.CentsOf(p)
		if err != nil {
			return market.Day{}, fmt.Errorf("prices[%d]: %w", h, err)
		}
		d.PricesCents[h] = c
	}
	if err := d.Check(); err != nil {
		return market.Day{}, err
	}
	return d, nil
}

var errNoDay = errors.New("no day is loaded (the task's setup step load_day has not run)")

func (e *Env) getPrices(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, Day, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.day == nil {
		return nil, Day{}, errNoDay
	}
	d := e.day
	out := Day{
		Date:          e.date,
		Hours:         len(d.PricesCents),
		PowerMW:       d.PowerMW,
		CapacityMWh:   d.CapacityMWh(),
		EfficiencyPct: d.EfficiencyPct,
		SellMWh:       float64(d.PowerMW*d.EfficiencyPct) / 100,
		StartMWh:      d.StartMWh(),
		Prices:        make([]float64, len(d.PricesCents)),
	}
	for h, c := range d.PricesCents {
		out.Prices[h] = float64(c) / 100
	}
	return nil, out, nil
}

func (e *Env) grade(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.day == nil {
		return nil, nil, errNoDay
	}
	g := market.GradeNone
	if e.last != nil {
		var err error
		if g, err = market.Grade(e.day.Profit(e.last), e.optimum); err != nil {
			return nil, nil, fmt.Errorf("grading: %w", err)
		}
	}
	e.log.Info("graded", "grade", g, "valid_submissions", e.submitted, "rejected", e.rejected)
	return textResult("%s", strconv.FormatFloat(g, 'f', -1, 64)), nil, nil
}

// Market converts get_prices's answer back into a market day.
func (d Day) Market() (market.Day, error) {
	if d.PowerMW < 1 || d.CapacityMWh%d.PowerMW != 0 || d.StartMWh%d.PowerMW != 0 {
		return market.Day{}, fmt.Errorf("battery %d MW, %d MWh, starting with %d MWh: the energies are not whole hours of power",
			d.PowerMW, d.CapacityMWh, d.StartMWh)
	}
	m := market.Day{
		Battery: market.Battery{
			PowerMW:       d.PowerMW,
			CapacityHours: d.CapacityMWh / d.PowerMW,
			EfficiencyPct: d.EfficiencyPct,
			StartHours:    d.StartMWh / d.PowerMW,
		},
		PricesCents: make([]int64, len(d.Prices)),
	}
	for h, p := range d.Prices {
		c, err := days.CentsOf(p)
		if err != nil {
			return market.Day{}, fmt.Errorf("prices[%d]: %w", h, err)
		}
		m.PricesCents[h] = c
	}
	if err := m.Check(); err != nil {
		return market.Day{}, err
	}
	return m, nil
}
