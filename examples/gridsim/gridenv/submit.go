package gridenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/examples/gridsim/market"
)

func toolError(err error) *mcp.CallToolResult {
	var r mcp.CallToolResult
	r.SetError(err)
	return &r
}

func (e *Env) submit(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.day == nil {
		return toolError(errNoDay), nil
	}
	schedule, err := e.read(req.Params.Arguments)
	if err != nil {
		e.rejected++
		e.log.Info("schedule rejected", "error", err)
		keep := "You have no valid schedule yet."
		if e.last != nil {
			keep = "Your last valid schedule still counts."
		}
		return toolError(fmt.Errorf("schedule rejected: %s. Nothing was recorded; fix it and submit again. %s",
			strings.TrimPrefix(err.Error(), "invalid schedule: "), keep)), nil
	}
	e.last = schedule
	e.submitted++
	var bought, sold int
	var cost, revenue market.Money
	for h, a := range schedule {
		switch g := e.day.Gain(h, a); a {
		case market.Charge:
			bought++
			cost -= g
		case market.Sell:
			sold++
			revenue += g
		}
	}
	profit := e.day.Profit(schedule)
	e.log.Info("schedule accepted", "submission", e.submitted, "profit", profit.String())
	return textResult("Schedule accepted (valid submission %d). It buys %d MWh for %s and sells %s MWh for %s: profit %s. "+
		"The last valid schedule you submit is the one graded; submit again to replace it.",
		e.submitted, bought*e.day.PowerMW, cost, mwh(sold*e.day.PowerMW*e.day.EfficiencyPct), revenue, profit), nil
}

// mwh formats hundredths of a MWh: 2640 → "26.4".
func mwh(hundredths int) string {
	return strconv.FormatFloat(float64(hundredths)/100, 'f', -1, 64)
}

const valuesRule = "each value must be -1 (sell), 0 (idle) or 1 (charge)"

var errArgsShape = errors.New(`the arguments must be an object like {"schedule": [0, 1, -1, ...]}`)

// read checks submit_schedule's raw arguments and the schedule they hold
// against the day, saying what is wrong in words the model can act on.
func (e *Env) read(raw json.RawMessage) ([]int, error) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, errArgsShape
	}
	for k := range args {
		if k != "schedule" {
			return nil, fmt.Errorf(`unknown argument %q: submit_schedule takes only "schedule"`, k)
		}
	}
	n := len(e.day.PricesCents)
	list, ok := args["schedule"]
	if !ok {
		return nil, fmt.Errorf(`the argument "schedule" is missing: it is a list of %d integers`, n)
	}
	var values []json.RawMessage
	if err := json.Unmarshal(list, &values); err != nil || values == nil {
		return nil, fmt.Errorf("schedule must be a list of %d integers, but it is %s", n, kindOf(list))
	}
	schedule := make([]int, len(values))
	var bad []string
	for h, v := range values {
		var f float64
		if !isNumber(v) || json.Unmarshal(v, &f) != nil {
			bad = append(bad, fmt.Sprintf("hour %d has %s, but %s", h, kindOf(v), valuesRule))
			continue
		}
		if f != math.Trunc(f) || f < -1 || f > 1 {
			bad = append(bad, fmt.Sprintf("hour %d has %s, but %s", h, strconv.FormatFloat(f, 'f', -1, 64), valuesRule))
			continue
		}
		schedule[h] = int(f)
	}
	// With the wrong length, Validate says so first: hour numbers mislead.
	if len(values) == n && len(bad) > 0 {
		return nil, &market.InvalidError{Problems: bad}
	}
	if err := e.day.Validate(schedule); err != nil {
		return nil, err
	}
	return schedule, nil
}

// isNumber reports whether v is a JSON number (null would unmarshal into
// a float64 without error).
func isNumber(v json.RawMessage) bool {
	t := strings.TrimSpace(string(v))
	return t != "" && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9'))
}

// kindOf names a JSON value for an error message: `the string "1"`,
// `null`, `an object`, or a number as written.
func kindOf(v json.RawMessage) string {
	t := strings.TrimSpace(string(v))
	switch {
	case t == "" || t == "null":
		return "null"
	case t[0] == '"':
		if len(t) <= 24 {
			return "the string " + t
		}
		return "a string"
	case t[0] == '{':
		return "an object"
	case t[0] == '[':
		return "a list"
	}
	return t
}
