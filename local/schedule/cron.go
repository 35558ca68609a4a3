package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	minYear = 1970
	maxYear = 2199
)

// bitset holds small non-negative integers (0..255).
type bitset [4]uint64

func (b *bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b *bitset) has(i int) bool { return i >= 0 && i < 256 && b[i/64]&(1<<(i%64)) != 0 }

// field describes one cron field.
type field struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i
	wrap     bool     // ranges may wrap around (FRI-MON)
}

var (
	minuteField = field{name: "minutes", min: 0, max: 59, wrap: true}
	hourField   = field{name: "hours", min: 0, max: 23, wrap: true}
	domField    = field{name: "day-of-month", min: 1, max: 31, wrap: true}
	monthField  = field{name: "month", min: 1, max: 12, wrap: true,
		names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}}
	dowField = field{name: "day-of-week", min: 1, max: 7, wrap: true,
		names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}}
	yearField = field{name: "year", min: minYear, max: maxYear}
)

type domKind int

const (
	domAny            domKind = iota // ?
	domSet                           // values, ranges, lists, steps
	domLast                          // L
	domLastWeekday                   // LW
	domNearestWeekday                // 15W
)

type dowKind int

const (
	dowAny  dowKind = iota // ?
	dowSet                 // values, ranges, lists, steps (L alone is SAT)
	dowLast                // 6L: last Friday of the month
	dowNth                 // 2#1: first Monday of the month
)

type cronSpec struct {
	minutes, hours, months, years bitset // years hold year-minYear

	dom    domKind
	doms   bitset
	domDay int // for domNearestWeekday

	dow     dowKind
	dows    bitset // 1=SUN..7=SAT
	dowDay  int    // for dowLast and dowNth: 1=SUN..7=SAT
	dowNthN int    // for dowNth: 1..5
}

func parseCron(inner string) (*cronSpec, error) {
	bad := func(msg string) error {
		return &Error{Kind: "cron", Expr: inner, Msg: msg, Err: ErrInvalid}
	}
	f := strings.Fields(inner)
	if len(f) != 6 {
		return nil, bad(fmt.Sprintf("want 6 fields (minutes hours day-of-month month day-of-week year), got %d", len(f)))
	}
	var c cronSpec
	var err error
	list := func(dst *bitset, def field, s string) {
		if err == nil {
			*dst, err = parseList(def, s)
		}
	}
	list(&c.minutes, minuteField, f[0])
	list(&c.hours, hourField, f[1])
	list(&c.months, monthField, f[3])
	list(&c.years, yearField, f[5])
	if err == nil {
		err = c.parseDayOfMonth(f[2])
	}
	if err == nil {
		err = c.parseDayOfWeek(f[4])
	}
	if fe := (*fieldError)(nil); errors.As(err, &fe) {
		return nil, &Error{Kind: "cron", Expr: inner, Msg: fe.msg, Err: fe.kind}
	}
	switch {
	case c.dom != domAny && c.dow != dowAny:
		return nil, bad("day-of-month and day-of-week cannot both be specified; use ? in one of them")
	case c.dom == domAny && c.dow == dowAny:
		return nil, bad("day-of-month and day-of-week cannot both be ?; specify one of them")
	}
	return &c, nil
}

// fieldError is parseList's error before it gains the expression.
type fieldError struct {
	msg  string
	kind error
}

func (e *fieldError) Error() string { return e.msg }

func invalid(def field, s, format string, args ...any) error {
	return &fieldError{msg: fmt.Sprintf("%s %q: %s", def.name, s, fmt.Sprintf(format, args...)), kind: ErrInvalid}
}

func unsupported(def field, s, format string, args ...any) error {
	return &fieldError{msg: fmt.Sprintf("%s %q: %s", def.name, s, fmt.Sprintf(format, args...)), kind: ErrUnsupported}
}

// parseList reads a comma-separated list of *, values, ranges and steps.
func parseList(def field, s string) (bitset, error) {
	var set bitset
	if s == "" {
		return set, invalid(def, s, "empty field")
	}
	for item := range strings.SplitSeq(s, ",") {
		if err := parseItem(def, item, &set); err != nil {
			return set, err
		}
	}
	return set, nil
}

func parseItem(def field, item string, set *bitset) error {
	if item == "" {
		return invalid(def, item, "empty list item")
	}
	rng, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || !isDigits(stepText) || n < 1 {
			return invalid(def, item, "increment must be a positive integer")
		}
		if n > def.max-def.min+1 {
			return invalid(def, item, "increment %d is larger than the field's range %d-%d", n, def.min, def.max)
		}
		step = n
	}
	var lo, hi int
	switch {
	case rng == "*":
		lo, hi = def.min, def.max
	case strings.Contains(rng, "-"):
		a, b, _ := strings.Cut(rng, "-")
		var err error
		if lo, err = parseValue(def, a); err != nil {
			return err
		}
		if hi, err = parseValue(def, b); err != nil {
			return err
		}
		if hi < lo && !def.wrap {
			return invalid(def, item, "range end %d is before its start %d", hi, lo)
		}
	default:
		v, err := parseValue(def, rng)
		if err != nil {
			return err
		}
		lo, hi = v, v
		if hasStep { // 0/15: from 0 to the end of the field, every 15
			hi = def.max
		}
	}
	span := hi - lo
	if span < 0 { // wraps around: FRI-MON, 22-2
		span += def.max - def.min + 1
	}
	for i := 0; i <= span; i += step {
		v := lo + i
		if v > def.max {
			v -= def.max - def.min + 1
		}
		set.set(v - def.min)
	}
	return nil
}

func parseValue(def field, s string) (int, error) {
	if isDigits(s) {
		n, err := strconv.Atoi(s)
		if err != nil || n < def.min || n > def.max {
			return 0, invalid(def, s, "value out of range %d-%d", def.min, def.max)
		}
		return n, nil
	}
	for i, name := range def.names {
		if strings.EqualFold(s, name) {
			return def.min + i, nil
		}
	}
	switch {
	case s == "?":
		return 0, invalid(def, s, "? is only allowed alone, in day-of-month or day-of-week")
	case strings.ContainsAny(s, "LW#"):
		return 0, invalid(def, s, "L, W and # must stand alone in the field and are only allowed in day-of-month (L, W) or day-of-week (L, #)")
	case s == "":
		return 0, invalid(def, s, "missing value")
	default:
		return 0, invalid(def, s, "not a value")
	}
}

func (c *cronSpec) parseDayOfMonth(s string) error {
	def := domField
	switch {
	case s == "?":
		c.dom = domAny
		return nil
	case strings.EqualFold(s, "L"):
		c.dom = domLast
		return nil
	case strings.EqualFold(s, "LW"):
		c.dom = domLastWeekday
		return nil
	case strings.HasPrefix(strings.ToUpper(s), "L-"):
		return unsupported(def, s, "L-n offsets are not supported locally")
	case len(s) > 1 && (s[len(s)-1] == 'W' || s[len(s)-1] == 'w') && isDigits(s[:len(s)-1]):
		n, err := parseValue(def, s[:len(s)-1])
		if err != nil {
			return err
		}
		c.dom, c.domDay = domNearestWeekday, n
		return nil
	case strings.ContainsAny(s, "#"):
		return invalid(def, s, "# is only allowed in day-of-week")
	}
	set, err := parseList(def, s)
	if err != nil {
		return err
	}
	c.dom, c.doms = domSet, set
	return nil
}

func (c *cronSpec) parseDayOfWeek(s string) error {
	def := dowField
	switch {
	case s == "?":
		c.dow = dowAny
		return nil
	case strings.EqualFold(s, "L"): // the last day of the week: Saturday
		c.dow = dowSet
		c.dows.set(7 - def.min)
		return nil
	case strings.Contains(s, "#"):
		if strings.Contains(s, ",") {
			return invalid(def, s, "with #, day-of-week must hold a single expression")
		}
		day, nth, _ := strings.Cut(s, "#")
		d, err := parseValue(def, day)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(nth)
		if err != nil || !isDigits(nth) || n < 1 || n > 5 {
			return invalid(def, s, "the number after # must be 1-5")
		}
		c.dow, c.dowDay, c.dowNthN = dowNth, d, n
		return nil
	case len(s) > 1 && (s[len(s)-1] == 'L' || s[len(s)-1] == 'l') && !strings.ContainsAny(s[:len(s)-1], ",-/*"):
		d, err := parseValue(def, s[:len(s)-1])
		if err != nil {
			return err
		}
		c.dow, c.dowDay = dowLast, d
		return nil
	case strings.ContainsAny(s, "W"):
		return invalid(def, s, "W is only allowed in day-of-month")
	}
	set, err := parseList(def, s)
	if err != nil {
		return err
	}
	c.dow, c.dows = dowSet, set
	return nil
}

// next returns the first matching minute strictly after t (UTC), or zero.
func (c *cronSpec) next(t time.Time) time.Time {
	t = t.Truncate(time.Minute).Add(time.Minute)
	if t.Year() > maxYear {
		return time.Time{}
	}
	if t.Year() < minYear {
		t = time.Date(minYear, time.January, 1, 0, 0, 0, 0, time.UTC)
	}
	for y := t.Year(); y <= maxYear; y++ {
		if !c.years.has(y - minYear) {
			continue
		}
		firstMonth := 1
		if y == t.Year() {
			firstMonth = int(t.Month())
		}
		for m := firstMonth; m <= 12; m++ {
			if !c.months.has(m - 1) {
				continue
			}
			dim := daysIn(y, time.Month(m))
			firstDay := 1
			if y == t.Year() && m == int(t.Month()) {
				firstDay = t.Day()
			}
			for d := firstDay; d <= dim; d++ {
				if !c.dayMatches(y, time.Month(m), d, dim) {
					continue
				}
				sameDay := y == t.Year() && m == int(t.Month()) && d == t.Day()
				firstHour := 0
				if sameDay {
					firstHour = t.Hour()
				}
				for h := firstHour; h < 24; h++ {
					if !c.hours.has(h) {
						continue
					}
					firstMinute := 0
					if sameDay && h == t.Hour() {
						firstMinute = t.Minute()
					}
					for mi := firstMinute; mi < 60; mi++ {
						if c.minutes.has(mi) {
							return time.Date(y, time.Month(m), d, h, mi, 0, 0, time.UTC)
						}
					}
				}
			}
		}
	}
	return time.Time{}
}

func (c *cronSpec) dayMatches(y int, m time.Month, d, dim int) bool {
	switch c.dom {
	case domSet:
		return c.doms.has(d - 1)
	case domLast:
		return d == dim
	case domLastWeekday:
		return d == lastWeekday(y, m, dim)
	case domNearestWeekday:
		return d == nearestWeekday(y, m, c.domDay, dim)
	}
	wd := int(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday()) + 1 // 1=SUN
	switch c.dow {
	case dowSet:
		return c.dows.has(wd - 1)
	case dowLast:
		return wd == c.dowDay && d+7 > dim
	case dowNth:
		return wd == c.dowDay && (d-1)/7+1 == c.dowNthN
	}
	return false
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// lastWeekday is the last Monday-to-Friday day of the month.
func lastWeekday(y int, m time.Month, dim int) int {
	switch time.Date(y, m, dim, 0, 0, 0, 0, time.UTC).Weekday() {
	case time.Saturday:
		return dim - 1
	case time.Sunday:
		return dim - 2
	}
	return dim
}

// nearestWeekday is the Monday-to-Friday day nearest to day n, never leaving
// the month (Quartz's W): a Saturday moves to Friday, or to Monday the 3rd when
// n is the 1st; a Sunday moves to Monday, or to Friday when n is the last day.
// It returns 0 when the month has no day n (31W in April).
func nearestWeekday(y int, m time.Month, n, dim int) int {
	if n > dim {
		return 0
	}
	switch time.Date(y, m, n, 0, 0, 0, 0, time.UTC).Weekday() {
	case time.Saturday:
		if n == 1 {
			return 3
		}
		return n - 1
	case time.Sunday:
		if n == dim {
			return n - 2
		}
		return n + 1
	}
	return n
}
