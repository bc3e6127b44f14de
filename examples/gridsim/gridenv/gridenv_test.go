package gridenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/examples/gridsim/days"
	"github.com/agentenv/agentenv/examples/gridsim/gridenv"
	"github.com/agentenv/agentenv/examples/gridsim/internal/envproc"
	"github.com/agentenv/agentenv/examples/gridsim/market"
)

var envBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gridenv-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	envBin, err = envproc.Build(ctx, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startEnv runs the real env binary and connects an MCP client to it.
func startEnv(t *testing.T) (*envproc.Proc, *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := envproc.Start(ctx, envBin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	cs, err := p.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return p, cs
}

type reply struct {
	text    string
	isError bool
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return reply{b.String(), res.IsError}
}

// testDay: 10 MW, 20 MWh (two hours), 90%, starting with 10 MWh. Cheap
// night, dear evening.
func testDay() map[string]any {
	prices := make([]float64, 24)
	for h := range prices {
		prices[h] = 20
	}
	prices[3], prices[4], prices[18], prices[19] = 5.25, -2.5, 120, 80.1
	return map[string]any{
		"date": "2030-06-01", "power_mw": 10, "capacity_mwh": 20,
		"efficiency_pct": 90, "start_mwh": 10, "prices": prices,
	}
}

func hours(set map[int]int) []int {
	s := make([]int, 24)
	for h, a := range set {
		s[h] = a
	}
	return s
}

func anyHours(set map[int]any) []any {
	s := make([]any, 24)
	for h := range s {
		s[h] = 0
	}
	for h, v := range set {
		s[h] = v
	}
	return s
}

func TestToolsListed(t *testing.T) {
	_, cs := startEnv(t)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{gridenv.ToolPrices, gridenv.ToolGrade, gridenv.ToolLoadDay, gridenv.ToolSubmit}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
}

func TestBeforeLoad(t *testing.T) {
	_, cs := startEnv(t)
	for _, tool := range []string{gridenv.ToolPrices, gridenv.ToolSubmit, gridenv.ToolGrade} {
		args := map[string]any{}
		if tool == gridenv.ToolSubmit {
			args["schedule"] = make([]int, 24)
		}
		r := call(t, cs, tool, args)
		if !r.isError || !strings.Contains(r.text, "no day is loaded") {
			t.Errorf("%s before load_day: %+v, want a 'no day is loaded' error", tool, r)
		}
	}
}

func TestGetPrices(t *testing.T) {
	_, cs := startEnv(t)
	if r := call(t, cs, gridenv.ToolLoadDay, testDay()); r.isError {
		t.Fatalf("load_day: %s", r.text)
	}
	r := call(t, cs, gridenv.ToolPrices, map[string]any{})
	if r.isError {
		t.Fatalf("get_prices: %s", r.text)
	}
	var d gridenv.Day
	if err := json.Unmarshal([]byte(r.text), &d); err != nil {
		t.Fatalf("get_prices answered %q: %v", r.text, err)
	}
	want := testDay()
	if d.PowerMW != 10 || d.CapacityMWh != 20 || d.EfficiencyPct != 90 || d.StartMWh != 10 || d.SellMWh != 9 || d.Hours != 24 || d.Date != "2030-06-01" {
		t.Errorf("get_prices battery = %+v", d)
	}
	if !slices.Equal(d.Prices, want["prices"].([]float64)) {
		t.Errorf("get_prices prices = %v, want %v", d.Prices, want["prices"])
	}
}

func TestMalformedSchedules(t *testing.T) {
	_, cs := startEnv(t)
	if r := call(t, cs, gridenv.ToolLoadDay, testDay()); r.isError {
		t.Fatalf("load_day: %s", r.text)
	}
	cases := []struct {
		name string
		args any
		want []string
	}{
		{"too short", map[string]any{"schedule": make([]int, 23)}, []string{"it has 23 values", "exactly 24", "hour 0 to 23"}},
		{"too long", map[string]any{"schedule": make([]int, 25)}, []string{"it has 25 values", "exactly 24"}},
		{"empty", map[string]any{"schedule": []int{}}, []string{"it has 0 values"}},
		{"value 2", map[string]any{"schedule": hours(map[int]int{5: 2})}, []string{"hour 5 has 2", "-1 (sell), 0 (idle) or 1 (charge)"}},
		{"two bad values", map[string]any{"schedule": hours(map[int]int{0: -2, 23: 7})}, []string{"hour 0 has -2", "hour 23 has 7"}},
		{"over-charge", map[string]any{"schedule": hours(map[int]int{3: 1, 4: 1})},
			[]string{"hour 4 charges", "already full at the start of hour 4", "holds 20 MWh", "capacity is 20 MWh"}},
		{"over-sell", map[string]any{"schedule": hours(map[int]int{18: -1, 19: -1})},
			[]string{"hour 19 sells", "empty at the start of hour 19", "needs 10 MWh"}},
		{"fraction", map[string]any{"schedule": anyHours(map[int]any{7: 0.5})}, []string{"hour 7 has 0.5", "-1 (sell), 0 (idle) or 1 (charge)"}},
		{"string", map[string]any{"schedule": anyHours(map[int]any{2: "1"})}, []string{`hour 2 has the string "1"`}},
		{"null", map[string]any{"schedule": anyHours(map[int]any{9: nil})}, []string{"hour 9 has null"}},
		{"nested list", map[string]any{"schedule": anyHours(map[int]any{1: []int{1}})}, []string{"hour 1 has a list"}},
		{"not a list", map[string]any{"schedule": "0,0,0"}, []string{"schedule must be a list of 24 integers", `the string "0,0,0"`}},
		{"missing", map[string]any{}, []string{`"schedule" is missing`}},
		{"unknown key", map[string]any{"schedule": make([]int, 24), "hours": 24}, []string{`unknown argument "hours"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, cs, gridenv.ToolSubmit, c.args)
			if !r.isError {
				t.Fatalf("accepted: %s", r.text)
			}
			for _, w := range c.want {
				if !strings.Contains(r.text, w) {
					t.Errorf("answer %q does not say %q", r.text, w)
				}
			}
		})
	}
	// None of them counted.
	if r := call(t, cs, gridenv.ToolGrade, map[string]any{}); r.text != "0" {
		t.Fatalf("grade after only malformed schedules = %q, want 0", r.text)
	}
}

func TestLastValidScheduleCounts(t *testing.T) {
	_, cs := startEnv(t)
	if r := call(t, cs, gridenv.ToolLoadDay, testDay()); r.isError {
		t.Fatalf("load_day: %s", r.text)
	}
	// The market package's optimum must grade exactly 1 in the env.
	opt := optimalFor(t, testDay())
	steps := []struct {
		schedule []int
		want     string
	}{
		{opt, "1"},
		{hours(map[int]int{18: -1, 19: -1}), "1"},   // malformed: the optimum still counts
		{make([]int, 24), "0.2"},                    // idle replaces it
		{hours(map[int]int{18: 1, 19: -1}), "0"},    // buy dear, sell cheap: a loss
		{hours(map[int]int{0: -1, 18: 0}), "other"}, // sell the start charge at $20: in between
	}
	for i, s := range steps {
		call(t, cs, gridenv.ToolSubmit, map[string]any{"schedule": s.schedule})
		g := call(t, cs, gridenv.ToolGrade, map[string]any{})
		if g.isError {
			t.Fatalf("step %d: grade: %s", i, g.text)
		}
		if s.want == "other" {
			var v float64
			if _, err := fmt.Sscan(g.text, &v); err != nil || v <= 0.2 || v >= 1 {
				t.Fatalf("step %d: grade %q, want strictly between 0.2 and 1", i, g.text)
			}
			continue
		}
		if g.text != s.want {
			t.Fatalf("step %d: grade %q, want %s", i, g.text, s.want)
		}
	}
}

func optimalFor(t *testing.T, args map[string]any) []int {
	t.Helper()
	prices := args["prices"].([]float64)
	d := market.Day{
		Battery:     market.Battery{PowerMW: 10, CapacityHours: 2, EfficiencyPct: 90, StartHours: 1},
		PricesCents: make([]int64, len(prices)),
	}
	for h, p := range prices {
		c, err := days.CentsOf(p)
		if err != nil {
			t.Fatal(err)
		}
		d.PricesCents[h] = c
	}
	_, s := d.Optimum()
	return s
}

func TestLoadDayRefusals(t *testing.T) {
	_, cs := startEnv(t)
	cases := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"capacity not a multiple", func(a map[string]any) { a["capacity_mwh"] = 25 }, "capacity_mwh 25 is not a positive multiple of power_mw 10"},
		{"start not a multiple", func(a map[string]any) { a["start_mwh"] = 5 }, "start_mwh 5 is not a multiple"},
		{"start above capacity", func(a map[string]any) { a["start_mwh"] = 30 }, "starting charge 3 hours is outside 0..2"},
		{"zero power", func(a map[string]any) { a["power_mw"] = 0 }, "power_mw is 0"},
		{"23 prices", func(a map[string]any) { a["prices"] = make([]float64, 23) }, "prices has 23 values"},
		{"three decimals", func(a map[string]any) {
			p := slices.Clone(a["prices"].([]float64))
			p[7] = 12.345
			a["prices"] = p
		}, "prices[7]: price 12.345 has more than two decimals"},
		{"efficiency", func(a map[string]any) { a["efficiency_pct"] = 120 }, "efficiency 120%"},
		{"flat day", func(a map[string]any) { a["prices"], a["start_mwh"] = make([]float64, 24), 0 }, "positive optimum"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := testDay()
			c.edit(args)
			r := call(t, cs, gridenv.ToolLoadDay, args)
			if !r.isError || !strings.Contains(r.text, c.want) {
				t.Fatalf("load_day answered %+v, want an error saying %q", r, c.want)
			}
		})
	}
}

func TestSIGTERMExitsCleanly(t *testing.T) {
	p, _ := startEnv(t)
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	wait.Until(t, "the env to exit after SIGTERM", func() bool {
		done, err := p.Exited()
		exitErr = err
		return done
	})
	if exitErr != nil {
		t.Fatalf("env exited with %v after SIGTERM; stderr:\n%s", exitErr, p.Stderr())
	}
}

// With a reset tool named (agentenv names it for a bundle with reuse =
// N), the env serves it, and after a reset nothing of the episode before
// is left: no day, no schedule, and a day loaded again grades as never
// scheduled.
func TestResetLeavesNoState(t *testing.T) {
	t.Setenv("AGENTENV_RESET_TOOL", "agentenv_reset")
	_, cs := startEnv(t)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Tools, func(tool *mcp.Tool) bool { return tool.Name == "agentenv_reset" }) {
		t.Fatalf("the reset tool is not listed: %v", res.Tools)
	}
	if r := call(t, cs, gridenv.ToolLoadDay, testDay()); r.isError {
		t.Fatalf("load_day: %s", r.text)
	}
	// Charge in the cheap night, sell in the dear evening: a positive grade.
	if r := call(t, cs, gridenv.ToolSubmit, map[string]any{"schedule": hours(map[int]int{4: 1, 18: -1, 19: -1})}); r.isError {
		t.Fatalf("submit_schedule: %s", r.text)
	}
	if r := call(t, cs, gridenv.ToolGrade, map[string]any{}); r.isError || r.text == "0" {
		t.Fatalf("grade before the reset: %+v, want a positive grade", r)
	}
	if r := call(t, cs, "agentenv_reset", map[string]any{}); r.isError {
		t.Fatalf("reset: %s", r.text)
	}
	for _, tool := range []string{gridenv.ToolPrices, gridenv.ToolSubmit, gridenv.ToolGrade} {
		args := map[string]any{}
		if tool == gridenv.ToolSubmit {
			args["schedule"] = make([]int, 24)
		}
		if r := call(t, cs, tool, args); !r.isError || !strings.Contains(r.text, "no day is loaded") {
			t.Errorf("%s after the reset: %+v, want a 'no day is loaded' error", tool, r)
		}
	}
	if r := call(t, cs, gridenv.ToolLoadDay, testDay()); r.isError {
		t.Fatalf("load_day after the reset: %s", r.text)
	}
	if r := call(t, cs, gridenv.ToolGrade, map[string]any{}); r.isError || r.text != "0" {
		t.Fatalf("grade of the same day after the reset, nothing submitted: %+v, want 0 (the old schedule must be gone)", r)
	}
}
