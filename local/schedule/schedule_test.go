package schedule

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func mustParse(tb testing.TB, expr string) Schedule {
	tb.Helper()
	s, err := Parse(expr)
	if err != nil {
		tb.Fatalf("Parse(%q): %v", expr, err)
	}
	return s
}

func mustTime(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		tb.Fatalf("time %q: %v", s, err)
	}
	return t
}

func TestNextCron(t *testing.T) {
	tests := []struct {
		name  string
		expr  string
		after string
		want  string // "" for the zero time
	}{
		// EventBridge's documented examples.
		{"daily 10:00", "cron(0 10 * * ? *)", "2024-03-05T09:59:59Z", "2024-03-05T10:00:00Z"},
		{"daily 12:15 next day", "cron(15 12 * * ? *)", "2024-03-05T12:15:00Z", "2024-03-06T12:15:00Z"},
		{"weekdays 18:00 from friday night", "cron(0 18 ? * MON-FRI *)", "2024-03-08T18:00:00Z", "2024-03-11T18:00:00Z"},
		{"first of month 08:00", "cron(0 8 1 * ? *)", "2024-03-01T08:00:00Z", "2024-04-01T08:00:00Z"},
		{"every 15 minutes 0/15", "cron(0/15 * * * ? *)", "2024-03-05T10:07:30Z", "2024-03-05T10:15:00Z"},
		{"0/15 is strictly after", "cron(0/15 * * * ? *)", "2024-03-05T10:45:00Z", "2024-03-05T11:00:00Z"},
		{"every 10 minutes on weekdays from sunday", "cron(0/10 * ? * MON-FRI *)", "2024-03-10T12:00:00Z", "2024-03-11T00:00:00Z"},
		{"every 5 minutes in office hours", "cron(0/5 8-17 ? * MON-FRI *)", "2024-03-11T17:55:00Z", "2024-03-12T08:00:00Z"},
		{"first monday 2#1", "cron(0 9 ? * 2#1 *)", "2024-01-01T09:00:00Z", "2024-02-05T09:00:00Z"},
		{"first monday by name", "cron(0 9 ? * MON#1 *)", "2024-01-02T00:00:00Z", "2024-02-05T09:00:00Z"},
		{"last friday 6L in years", "cron(15 10 ? * 6L 2019-2022)", "2019-01-01T00:00:00Z", "2019-01-25T10:15:00Z"},
		{"last friday after the last year", "cron(15 10 ? * 6L 2019-2022)", "2022-12-30T10:15:00Z", ""},
		{"fifth friday skips months without one", "cron(0 0 ? * 6#5 *)", "2024-03-01T00:00:00Z", "2024-03-29T00:00:00Z"},
		{"fifth friday next", "cron(0 0 ? * 6#5 *)", "2024-03-29T00:00:00Z", "2024-05-31T00:00:00Z"},

		// Month ends and leap years.
		{"L in leap february", "cron(0 0 L * ? *)", "2024-02-01T00:00:00Z", "2024-02-29T00:00:00Z"},
		{"L in common february", "cron(0 0 L * ? *)", "2023-02-01T00:00:00Z", "2023-02-28T00:00:00Z"},
		{"L in april", "cron(30 23 L * ? *)", "2024-04-30T23:30:00Z", "2024-05-31T23:30:00Z"},
		{"29 february waits for a leap year", "cron(0 0 29 2 ? *)", "2023-03-01T00:00:00Z", "2024-02-29T00:00:00Z"},
		{"29 february 2100 is not a leap year", "cron(0 0 29 2 ? *)", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},
		{"31st skips short months", "cron(0 0 31 * ? *)", "2024-04-01T00:00:00Z", "2024-05-31T00:00:00Z"},
		{"year end rollover", "cron(59 23 31 12 ? *)", "2024-12-31T23:59:00Z", "2025-12-31T23:59:00Z"},
		{"new year", "cron(0 0 1 1 ? *)", "2024-12-31T23:59:59Z", "2025-01-01T00:00:00Z"},

		// W.
		{"15W on a saturday moves to friday", "cron(0 0 15W * ? *)", "2024-06-01T00:00:00Z", "2024-06-14T00:00:00Z"},
		{"15W on a sunday moves to monday", "cron(0 0 15W * ? *)", "2024-09-01T00:00:00Z", "2024-09-16T00:00:00Z"},
		{"1W on a saturday stays in the month", "cron(0 0 1W * ? *)", "2024-05-31T00:00:00Z", "2024-06-03T00:00:00Z"},
		{"31W on a sunday stays in the month", "cron(0 0 31W * ? *)", "2024-03-01T00:00:00Z", "2024-03-29T00:00:00Z"},
		{"31W skips months without a 31st", "cron(0 0 31W * ? *)", "2024-04-01T00:00:00Z", "2024-05-31T00:00:00Z"},
		{"LW on a saturday", "cron(0 0 LW * ? *)", "2024-08-01T00:00:00Z", "2024-08-30T00:00:00Z"},
		{"LW on a sunday", "cron(0 0 LW * ? *)", "2024-03-01T00:00:00Z", "2024-03-29T00:00:00Z"},

		// Lists, ranges, steps, names.
		{"lists", "cron(5,35 1,13 * * ? *)", "2024-03-05T01:35:00Z", "2024-03-05T13:05:00Z"},
		{"range of hours", "cron(0 9-11 * * ? *)", "2024-03-05T11:00:00Z", "2024-03-06T09:00:00Z"},
		{"range wraps past midnight", "cron(0 22-2 * * ? *)", "2024-03-05T02:30:00Z", "2024-03-05T22:00:00Z"},
		{"range wraps past midnight later", "cron(0 22-2 * * ? *)", "2024-03-05T23:00:00Z", "2024-03-06T00:00:00Z"},
		{"day-of-week range wraps", "cron(0 0 ? * FRI-MON *)", "2024-03-05T00:00:00Z", "2024-03-08T00:00:00Z"},
		{"stepped range", "cron(10-40/10 * * * ? *)", "2024-03-05T10:40:00Z", "2024-03-05T11:10:00Z"},
		{"star step", "cron(*/20 * * * ? *)", "2024-03-05T10:41:00Z", "2024-03-05T11:00:00Z"},
		{"1/10 starts at minute 1", "cron(1/10 * * * ? *)", "2024-03-05T10:02:00Z", "2024-03-05T10:11:00Z"},
		{"month names", "cron(0 0 1 JAN,JUL ? *)", "2024-02-01T00:00:00Z", "2024-07-01T00:00:00Z"},
		{"lower-case names", "cron(0 0 ? jan mon *)", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z"},
		{"day-of-week numbers 1=SUN", "cron(0 0 ? * 1 *)", "2024-03-05T00:00:00Z", "2024-03-10T00:00:00Z"},
		{"day-of-week 7=SAT", "cron(0 0 ? * 7 *)", "2024-03-05T00:00:00Z", "2024-03-09T00:00:00Z"},
		{"day-of-week L is saturday", "cron(0 0 ? * L *)", "2024-03-05T00:00:00Z", "2024-03-09T00:00:00Z"},
		{"day-of-month list and range", "cron(0 0 1,15-16 * ? *)", "2024-03-15T00:00:00Z", "2024-03-16T00:00:00Z"},

		// Years and clocks.
		{"single future year", "cron(0 0 1 1 ? 2030)", "2024-03-05T00:00:00Z", "2030-01-01T00:00:00Z"},
		{"past the last year", "cron(0 0 1 1 ? 2199)", "2199-01-01T00:00:00Z", ""},
		{"every year until 2199", "cron(59 23 31 12 ? *)", "2199-12-31T23:59:00Z", ""},
		{"year step", "cron(0 0 1 1 ? 2020/5)", "2026-01-01T00:00:00Z", "2030-01-01T00:00:00Z"},
		{"before 1970 starts in 1970", "cron(0 0 1 1 ? *)", "1960-06-01T00:00:00Z", "1970-01-01T00:00:00Z"},
		{"other time zones are read as UTC", "cron(0 10 * * ? *)", "2024-03-05T11:30:00+02:00", "2024-03-05T10:00:00Z"},
		{"seconds are ignored", "cron(* * * * ? *)", "2024-03-05T10:00:59.999Z", "2024-03-05T10:01:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.expr)
			got := s.Next(mustTime(t, tt.after))
			var want time.Time
			if tt.want != "" {
				want = mustTime(t, tt.want)
			}
			if !got.Equal(want) {
				t.Errorf("%s.Next(%s) = %v, want %v", tt.expr, tt.after, got, want)
			}
			if !got.IsZero() && got.Location() != time.UTC {
				t.Errorf("Next returned %v in %v, want UTC", got, got.Location())
			}
		})
	}
}

func TestNextRate(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want time.Duration
	}{
		{"one minute", "rate(1 minute)", time.Minute},
		{"five minutes", "rate(5 minutes)", 5 * time.Minute},
		{"one hour", "rate(1 hour)", time.Hour},
		{"two hours", "rate(2 hours)", 2 * time.Hour},
		{"one day", "rate(1 day)", 24 * time.Hour},
		{"two days", "rate(2 days)", 48 * time.Hour},
		{"surrounding space", "  rate( 10   minutes )  ", 10 * time.Minute},
	}
	created := mustTime(t, "2024-03-05T10:07:30Z")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.expr)
			if got, ok := s.Rate(); !ok || got != tt.want {
				t.Errorf("Rate() = %v, %v, want %v, true", got, ok, tt.want)
			}
			first := s.Next(created)
			if got, want := first, created.Add(tt.want); !got.Equal(want) {
				t.Errorf("first Next = %v, want %v", got, want)
			}
			if got, want := s.Next(first), created.Add(2*tt.want); !got.Equal(want) {
				t.Errorf("second Next = %v, want %v", got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		expr string
		kind string
		want error
	}{
		{"empty", "", "expression", ErrInvalid},
		{"not an expression", "every 5 minutes", "expression", ErrInvalid},
		{"missing parenthesis", "rate(5 minutes", "expression", ErrInvalid},
		{"at expression", "at(2024-03-05T10:00:00)", "expression", ErrInvalid},

		{"rate plural with 1", "rate(1 minutes)", "rate", ErrInvalid},
		{"rate singular with 5", "rate(5 minute)", "rate", ErrInvalid},
		{"rate singular hour with 2", "rate(2 hour)", "rate", ErrInvalid},
		{"rate zero", "rate(0 minutes)", "rate", ErrInvalid},
		{"rate negative", "rate(-1 minutes)", "rate", ErrInvalid},
		{"rate sign", "rate(+5 minutes)", "rate", ErrInvalid},
		{"rate fraction", "rate(1.5 hours)", "rate", ErrInvalid},
		{"rate seconds", "rate(30 seconds)", "rate", ErrInvalid},
		{"rate weeks", "rate(2 weeks)", "rate", ErrInvalid},
		{"rate upper-case unit", "rate(5 MINUTES)", "rate", ErrInvalid},
		{"rate no unit", "rate(5)", "rate", ErrInvalid},
		{"rate empty", "rate()", "rate", ErrInvalid},
		{"rate extra field", "rate(5 minutes now)", "rate", ErrInvalid},
		{"rate overflow", "rate(99999999999999999999 days)", "rate", ErrInvalid},
		{"rate too long for a duration", "rate(200000 days)", "rate", ErrInvalid},

		{"both days specified", "cron(0 10 * * * *)", "cron", ErrInvalid},
		{"both days given values", "cron(0 10 15 * 2#1 *)", "cron", ErrInvalid},
		{"both days ?", "cron(0 10 ? * ? *)", "cron", ErrInvalid},
		{"five fields", "cron(0 10 * * ?)", "cron", ErrInvalid},
		{"seven fields", "cron(0 0 10 * * ? *)", "cron", ErrInvalid},
		{"minute 60", "cron(60 * * * ? *)", "cron", ErrInvalid},
		{"hour 24", "cron(0 24 * * ? *)", "cron", ErrInvalid},
		{"day 0", "cron(0 0 0 * ? *)", "cron", ErrInvalid},
		{"day 32", "cron(0 0 32 * ? *)", "cron", ErrInvalid},
		{"month 13", "cron(0 0 * 13 ? *)", "cron", ErrInvalid},
		{"month name typo", "cron(0 0 * JANUARY ? *)", "cron", ErrInvalid},
		{"day-of-week 0", "cron(0 0 ? * 0 *)", "cron", ErrInvalid},
		{"day-of-week 8", "cron(0 0 ? * 8 *)", "cron", ErrInvalid},
		{"year 1969", "cron(0 0 * * ? 1969)", "cron", ErrInvalid},
		{"year 2200", "cron(0 0 * * ? 2200)", "cron", ErrInvalid},
		{"year range backwards", "cron(0 0 * * ? 2030-2020)", "cron", ErrInvalid},
		{"step zero", "cron(0/0 * * * ? *)", "cron", ErrInvalid},
		{"step too large", "cron(0/61 * * * ? *)", "cron", ErrInvalid},
		{"step not a number", "cron(0/x * * * ? *)", "cron", ErrInvalid},
		{"? in minutes", "cron(? * * * ? *)", "cron", ErrInvalid},
		{"? in a list", "cron(0 0 ?,1 * ? *)", "cron", ErrInvalid},
		{"L in hours", "cron(0 L * * ? *)", "cron", ErrInvalid},
		{"W in day-of-week", "cron(0 0 ? * 2W *)", "cron", ErrInvalid},
		{"W in a list", "cron(0 0 1W,15 * ? *)", "cron", ErrInvalid},
		{"# in day-of-month", "cron(0 0 2#1 * ? *)", "cron", ErrInvalid},
		{"two # expressions", "cron(0 0 ? * 3#1,6#3 *)", "cron", ErrInvalid},
		{"# sixth week", "cron(0 0 ? * 2#6 *)", "cron", ErrInvalid},
		{"# zero", "cron(0 0 ? * 2#0 *)", "cron", ErrInvalid},
		{"L in a day-of-week range", "cron(0 0 ? * 2-6L *)", "cron", ErrInvalid},
		{"empty list item", "cron(,5 * * * ? *)", "cron", ErrInvalid},
		{"double range", "cron(1-2-3 * * * ? *)", "cron", ErrInvalid},
		{"letters", "cron(a * * * ? *)", "cron", ErrInvalid},
		{"L offset", "cron(0 0 L-3 * ? *)", "cron", ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.expr)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", tt.expr, s)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Parse(%q) error %v, want one wrapping %v", tt.expr, err, tt.want)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %T, want *Error", tt.expr, err)
			}
			if got, want := pe.Kind, tt.kind; got != want {
				t.Errorf("Kind = %q, want %q", got, want)
			}
		})
	}
}

func TestZeroSchedule(t *testing.T) {
	var s Schedule
	if got := s.Next(mustTime(t, "2024-03-05T10:00:00Z")); !got.IsZero() {
		t.Errorf("zero Schedule Next = %v, want zero", got)
	}
}

// TestNextMatchesBruteForce checks Next against a minute-by-minute scan over
// random expressions, so the search's skipping of years, months, days and
// hours never jumps over a match.
func TestNextMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(options ...string) string { return options[r.IntN(len(options))] }
	for i := range 300 {
		minutes := pick("*", "0", "0/15", "5,35", "50-10", "*/7", "59")
		hours := pick("*", "0", "9-17", "22-2", "*/5", "23")
		var dom, dow string
		if r.IntN(2) == 0 {
			dom, dow = pick("*", "1", "L", "LW", "15W", "1W", "31", "29", "28-3", "1,15", "1/10"), "?"
		} else {
			dom, dow = "?", pick("*", "MON-FRI", "1", "L", "6L", "2#1", "7#5", "FRI-MON", "2/3")
		}
		month := pick("*", "FEB", "1,7", "NOV-FEB", "*/4")
		expr := fmt.Sprintf("cron(%s %s %s %s %s *)", minutes, hours, dom, month, dow)
		s := mustParse(t, expr)
		after := time.Date(2023+r.IntN(3), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), 0, time.UTC)
		got := s.Next(after)
		want := bruteNext(s.cron, after, 2*366*24*60)
		if !want.IsZero() && !got.Equal(want) {
			t.Fatalf("case %d: %s.Next(%v) = %v, want %v", i, expr, after, got, want)
		}
		if want.IsZero() && !got.IsZero() && got.Before(after.Add(2*366*24*time.Hour)) {
			t.Fatalf("case %d: %s.Next(%v) = %v, but the scan found nothing before it", i, expr, after, got)
		}
	}
}

// bruteNext scans minute by minute for up to limit minutes, checking every
// field of each minute; it only skips the rest of a day whose date fails.
func bruteNext(c *cronSpec, after time.Time, limit int) time.Time {
	end := after.Add(time.Duration(limit) * time.Minute)
	for t := after.Truncate(time.Minute).Add(time.Minute); t.Before(end); {
		dim := daysIn(t.Year(), t.Month())
		if !c.years.has(t.Year()-minYear) || !c.months.has(int(t.Month())-1) || !c.dayMatches(t.Year(), t.Month(), t.Day(), dim) {
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if c.hours.has(t.Hour()) && c.minutes.has(t.Minute()) {
			return t
		}
		t = t.Add(time.Minute)
	}
	return time.Time{}
}

func BenchmarkNextSparse(b *testing.B) {
	s := mustParse(b, "cron(0 0 29 2 ? *)")
	after := mustTime(b, "2097-03-01T00:00:00Z")
	for b.Loop() {
		s.Next(after)
	}
}

func ExampleParse() {
	s, err := Parse("cron(0 9 ? * 2#1 *)") // 09:00 UTC on the first Monday of each month
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Next(time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC)))
	// Output: 2024-02-05 09:00:00 +0000 UTC
}

func ExampleParse_error() {
	_, err := Parse("cron(0 10 * * * *)")
	fmt.Println(err)
	// Output: schedule: cron "0 10 * * * *": day-of-month and day-of-week cannot both be specified; use ? in one of them
}
