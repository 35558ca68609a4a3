package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

// localClock shows or moves every clock of the running local stack: the
// functions' (the counter's fence, the rotator's months), the schedules'
// (the rotator's daily run fires when moved past it) and the commands'
// that read local.env (tables, votes send). A month's end can so be
// rehearsed as it happens on AWS.
func localClock(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local clock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stack := newStackFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ddbpipe local clock [TIME | +DURATION | -DURATION | now]\n"+
			"  TIME: RFC 3339 (2026-12-04T02:00:00Z) or a date (2026-12-04, midnight UTC)\n"+
			"  DURATION: Go's (90m, 36h) or days (3d)\n"+
			"  now: back to the real clock")
		fs.PrintDefaults()
	}
	var arg string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") || len(args) > 0 && isDuration(args[0]) {
		arg, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if arg == "" && fs.NArg() == 1 {
		arg = fs.Arg(0) // after the flags
	} else if fs.NArg() > 0 {
		return fmt.Errorf("local clock: one time at most, got %q", fs.Args())
	}
	vars, err := stack.vars()
	if err != nil {
		return err
	}
	file := vars[lambdafn.ClockFileVar]
	if file == "" {
		return errors.New("local clock: this local stack's clock cannot move (its local.env names no clock file): restart it with `ddbpipe local up`")
	}
	offset, err := lambdafn.ReadClockOffset(file)
	if err != nil {
		return fmt.Errorf("local clock: %w (is the stack running? `ddbpipe local up`)", err)
	}
	if arg != "" {
		if offset, err = newOffset(arg, offset, time.Now()); err != nil {
			return fmt.Errorf("local clock: %w", err)
		}
		if err := lambdafn.WriteClockOffset(file, offset); err != nil {
			return fmt.Errorf("local clock: %w", err)
		}
	}
	fmt.Fprintf(stdout, "%s (%s)\n", time.Now().Add(offset).UTC().Format(time.RFC3339), describeOffset(offset))
	return nil
}

// newOffset is the clock's offset from the real time after arg, given the
// current offset.
func newOffset(arg string, current time.Duration, now time.Time) (time.Duration, error) {
	switch {
	case arg == "now":
		return 0, nil
	case isDuration(arg):
		d, err := parseDays(arg)
		if err != nil {
			return 0, err
		}
		return current + d, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, arg); err == nil {
			return t.Sub(now), nil
		}
	}
	return 0, fmt.Errorf("%q: want an RFC 3339 time (2026-12-04T02:00:00Z), a date (2026-12-04), +DURATION, -DURATION or now", arg)
}

func isDuration(s string) bool {
	return strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") && len(s) > 1 && s[1] >= '0' && s[1] <= '9'
}

// parseDays reads a signed Go duration, or a whole number of days ("3d").
func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("%q: want a whole number of days, like +3d", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration like +36h, -90m or +3d", s)
	}
	return d, nil
}

func describeOffset(d time.Duration) string {
	if d == 0 {
		return "the real clock"
	}
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("the real clock %s%s", sign, d.Round(time.Second))
}
