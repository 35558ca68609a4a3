// Package schedule reads EventBridge schedule expressions, rate(value unit) and
// cron(Minutes Hours Day-of-month Month Day-of-week Year), and says when a rule
// fires next, so the local runner can invoke scheduled functions the way an
// EventBridge rule does. All times are UTC, as in EventBridge.
//
// Supported, with EventBridge's rules:
//
//   - rate(1 minute), rate(5 minutes), rate(1 hour), rate(2 hours), rate(1 day),
//     rate(7 days): a positive integer; the unit is singular exactly when the
//     value is 1.
//   - cron with six fields; * , - / in every field; ? in day-of-month or
//     day-of-week (exactly one of them must be ?); names JAN-DEC and SUN-SAT
//     (case-insensitive); day-of-week 1-7 with 1=SUN; years 1970-2199.
//   - L (last day) and W (nearest weekday: 15W, LW) in day-of-month; L (alone:
//     Saturday, the last day of the week; 6L: last Friday of the month) and
//     # (2#1: first Monday) in day-of-week.
//
// Ranges whose end is below their start wrap around (FRI-MON, 22-2), except
// in the year field. L-n offsets in day-of-month are not supported locally
// and fail with an error that wraps [ErrUnsupported].
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors wrapped by every *Error, for errors.Is.
var (
	// ErrInvalid: the expression is not one EventBridge accepts.
	ErrInvalid = errors.New("schedule: invalid expression")
	// ErrUnsupported: EventBridge may accept the expression, but this package
	// cannot evaluate it locally.
	ErrUnsupported = errors.New("schedule: not supported locally")
)

// Error describes an expression that could not be parsed. Kind is "rate",
// "cron" or "expression"; Expr is what stood between the parentheses (or the
// whole input when Kind is "expression").
type Error struct {
	Kind string
	Expr string
	Msg  string
	Err  error // ErrInvalid or ErrUnsupported
}

func (e *Error) Error() string {
	return fmt.Sprintf("schedule: %s %q: %s", e.Kind, e.Expr, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Schedule is a parsed schedule expression. The zero Schedule never fires.
type Schedule struct {
	expr  string
	every time.Duration
	cron  *cronSpec
}

// Parse reads an EventBridge schedule expression: rate(...) or cron(...).
func Parse(expr string) (Schedule, error) {
	s := strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(s, "rate(") && strings.HasSuffix(s, ")"):
		inner := s[len("rate(") : len(s)-1]
		d, err := parseRate(inner)
		if err != nil {
			return Schedule{}, err
		}
		return Schedule{expr: s, every: d}, nil
	case strings.HasPrefix(s, "cron(") && strings.HasSuffix(s, ")"):
		inner := s[len("cron(") : len(s)-1]
		c, err := parseCron(inner)
		if err != nil {
			return Schedule{}, err
		}
		return Schedule{expr: s, cron: c}, nil
	default:
		return Schedule{}, &Error{Kind: "expression", Expr: expr, Msg: "want rate(value unit) or cron(fields)", Err: ErrInvalid}
	}
}

// String returns the expression as it was parsed (trimmed).
func (s Schedule) String() string { return s.expr }

// Rate reports the interval of a rate expression; ok is false for cron
// expressions and the zero Schedule.
func (s Schedule) Rate() (every time.Duration, ok bool) { return s.every, s.every > 0 }

// Next returns the first time strictly after after at which the schedule
// fires, in UTC, or the zero time if it never fires again (a cron whose years
// are all past, or the zero Schedule).
//
// A rate expression counts from when its rule is created, not from the clock
// face: EventBridge fires rate(5 minutes) five minutes after the rule is
// created, then every five minutes. Next therefore returns after plus the
// rate; pass the rule's creation time first and each firing time after that.
// A cron expression fires on whole minutes.
func (s Schedule) Next(after time.Time) time.Time {
	switch {
	case s.every > 0:
		return after.UTC().Add(s.every)
	case s.cron != nil:
		return s.cron.next(after.UTC())
	default:
		return time.Time{}
	}
}

func parseRate(inner string) (time.Duration, error) {
	bad := func(msg string) error {
		return &Error{Kind: "rate", Expr: inner, Msg: msg, Err: ErrInvalid}
	}
	fields := strings.Fields(inner)
	if len(fields) != 2 {
		return 0, bad("want two fields, value and unit")
	}
	value, unit := fields[0], fields[1]
	if !isDigits(value) {
		return 0, bad("value must be a positive integer")
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 1 {
		return 0, bad("value must be a positive integer")
	}
	var per time.Duration
	singular := strings.TrimSuffix(unit, "s")
	switch singular {
	case "minute":
		per = time.Minute
	case "hour":
		per = time.Hour
	case "day":
		per = 24 * time.Hour
	default:
		return 0, bad(fmt.Sprintf("unknown unit %q, want minute(s), hour(s) or day(s)", unit))
	}
	switch plural := strings.HasSuffix(unit, "s"); {
	case n == 1 && plural:
		return 0, bad(fmt.Sprintf("unit must be singular (%q) when the value is 1", singular))
	case n > 1 && !plural:
		return 0, bad(fmt.Sprintf("unit must be plural (%q) when the value is not 1", singular+"s"))
	}
	if n > int64(1<<63-1)/int64(per) {
		return 0, bad("interval too long")
	}
	return time.Duration(n) * per, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
