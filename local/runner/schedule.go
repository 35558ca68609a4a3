package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ddbpipe/ddbpipe/local/schedule"
)

// ScheduleMapping fires a function on an EventBridge schedule expression.
type ScheduleMapping struct {
	ID         string
	Function   string
	Expression string // rate(...) or cron(...)
	RuleARN    string // put in the event's resources
	Disabled   bool
}

// AddSchedule registers a schedule. Scheduled invocations are asynchronous:
// a failed one is retried twice, as Lambda does for EventBridge targets.
func (r *Runner) AddSchedule(m ScheduleMapping) (string, error) {
	if _, err := r.Function(m.Function); err != nil {
		return "", err
	}
	s, err := schedule.Parse(m.Expression)
	if err != nil {
		return "", fmt.Errorf("runner: %s: %w", m.Function, err)
	}
	if m.RuleARN == "" {
		m.RuleARN = fmt.Sprintf("arn:aws:events:%s:000000000000:rule/%s", r.region, m.Function)
	}
	if m.ID == "" {
		m.ID = newID()
	}
	if m.Disabled {
		return m.ID, nil
	}
	clock := r.clock
	if r.scheduleClock != nil {
		clock = r.scheduleClock
	}
	r.add(&source{id: m.ID, kind: "schedule", desc: m.Expression + " → " + m.Function, start: func(ctx context.Context) {
		at := clock.Now()
		for {
			at = s.Next(at)
			if at.IsZero() {
				return
			}
			if clock.Sleep(ctx, at.Sub(clock.Now())) != nil {
				return
			}
			// A clock moved days on fires once, for the latest time due,
			// not once for every time it passed (a moved clock only).
			for n := s.Next(at); !n.IsZero() && !n.After(clock.Now()); n = s.Next(n) {
				at = n
			}
			if err := r.Fire(context.WithoutCancel(ctx), m.Function, m.RuleARN, at); err != nil {
				r.log.Error("scheduled invocation failed after retries", "function", m.Function, "err", err)
			}
		}
	}})
	return m.ID, nil
}

// Fire invokes a function with a "Scheduled Event" for time at, now: the
// manual trigger for scheduled functions. Like an asynchronous invocation it
// is retried twice on error.
func (r *Runner) Fire(ctx context.Context, function, ruleARN string, at time.Time) error {
	if ruleARN == "" {
		ruleARN = fmt.Sprintf("arn:aws:events:%s:000000000000:rule/%s", r.region, function)
	}
	ev, err := schedule.ScheduledEvent(ruleARN, at, newID())
	if err != nil {
		return err
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("runner: marshal scheduled event: %w", err)
	}
	return r.invokeAsync(ctx, function, payload)
}

// invokeAsync is Lambda's asynchronous invocation: up to two retries with a
// pause between them.
func (r *Runner) invokeAsync(ctx context.Context, function string, payload []byte) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 && r.clock.Sleep(ctx, time.Duration(attempt)*time.Second) != nil {
			return ctx.Err()
		}
		if _, err = r.Invoke(ctx, function, payload); err == nil {
			return nil
		}
	}
	return err
}
