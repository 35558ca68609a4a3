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

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

// localClock shows or moves every clock of the running local stack: the
// functions' (the counter's fence, the rotator's months), the schedules'
// (the rotator's daily run fires when moved past it) and the commands'
// that read local.env (tables, votes send). A month's end can so be
// rehearsed as it happens on AWS.
//
// A month the rotator retired stays retired whatever the clock says, so a
// move back to before a retirement is refused, naming the months it would
// leave retired but open by the clock, unless -force (they stay retired:
// their votes are rejected month-closed) or -reopen (the local stack
// starts them over, empty).
func localClock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local clock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stack := newStackFlags(fs)
	force := fs.Bool("force", false, "move back before a month's retirement anyway: the month stays retired, its votes rejected month-closed")
	reopen := fs.Bool("reopen", false, "start over the retired months the clock has open (local stack only): their archive and the tally's checkpoints are removed, their tables created again, empty")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ddbpipe local clock [-force | -reopen] [TIME | month-end[+DURATION] | +DURATION | -DURATION | now]\n"+
			"  TIME: RFC 3339 (2026-12-04T02:00:00Z) or a date (2026-12-04, midnight UTC)\n"+
			"  month-end: the end of the clock's month (midnight UTC of the 1st of the next), +DURATION past it\n"+
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
	if *force && *reopen {
		return errors.New("local clock: -force or -reopen, not both")
	}
	moved := offset
	if arg != "" {
		if moved, err = newOffset(arg, offset, time.Now()); err != nil {
			return fmt.Errorf("local clock: %w", err)
		}
	}
	// Retired months the new clock has open: moving back, or when asked.
	var lm *ledgerMonths
	var left []retiredMonth
	if moved < offset || *reopen {
		if lm, err = openLedgerMonths(ctx, *stack.root, *stack.state); err != nil {
			return fmt.Errorf("local clock: %w", err)
		}
		now := time.Now()
		if left, err = lm.retiredOpen(ctx, now.Add(moved).UTC(), now.Add(offset).UTC()); err != nil {
			return fmt.Errorf("local clock: %w", err)
		}
		if len(left) > 0 && !*force && !*reopen {
			return leftRetired(arg, now.Add(moved).UTC(), left)
		}
	}
	if moved != offset {
		if err := lambdafn.WriteClockOffset(file, moved); err != nil {
			return fmt.Errorf("local clock: %w", err)
		}
	}
	fmt.Fprintf(stdout, "%s (%s)\n", time.Now().Add(moved).UTC().Format(time.RFC3339), describeOffset(moved))
	if *reopen {
		return lm.reopen(ctx, left, stdout)
	}
	for _, r := range left {
		fmt.Fprintf(stdout, "%s stays retired (archive verified %s): its votes are rejected month-closed\n", r.month, r.at.Format(time.RFC3339))
	}
	return nil
}

// leftRetired is the refusal of a move back to t that would leave months
// retired although t has them open, with the two ways on.
func leftRetired(arg string, t time.Time, months []retiredMonth) error {
	var b strings.Builder
	fmt.Fprintf(&b, "local clock: %s is before the retirement of", t.Format(time.RFC3339))
	for i, r := range months {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s (archive verified %s; by that clock it takes votes until %s)", r.month, r.at.Format(time.RFC3339), r.closes.Format(time.RFC3339))
	}
	if arg == "" {
		arg = "TIME"
	}
	b.WriteString(".\nA retired month stays retired whatever the clock says: its table is gone, its votes are rejected month-closed, and the rotator does not create it again.\n")
	fmt.Fprintf(&b, "  ddbpipe local clock -force %s    move back anyway; the month stays retired\n", arg)
	fmt.Fprintf(&b, "  ddbpipe local clock -reopen %s   move back and start the month over (local stack only): its archive and the tally's checkpoints are removed, its table created again, empty; the polls' totals keep its votes", arg)
	return errors.New(b.String())
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
	case strings.HasPrefix(arg, "month-end"):
		end := ledger.End(now.Add(current))
		past := strings.TrimPrefix(arg, "month-end")
		if past == "" {
			return end.Sub(now), nil
		}
		if !isDuration(past) {
			return 0, fmt.Errorf("%q: want month-end or month-end+DURATION, like month-end+50h", arg)
		}
		d, err := parseDays(past)
		if err != nil {
			return 0, err
		}
		return end.Add(d).Sub(now), nil
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
