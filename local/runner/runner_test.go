package runner

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// fakeClock is a clock the test moves: Sleep blocks until the test calls
// advance past its end (or the context ends), so nothing waits on real time.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	sleepers []*sleeper
	asleep   chan struct{} // a token each time a goroutine starts sleeping
}

type sleeper struct {
	until time.Time
	wake  chan struct{}
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, asleep: make(chan struct{}, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	c.mu.Lock()
	s := &sleeper{until: c.now.Add(d), wake: make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	c.mu.Unlock()
	c.asleep <- struct{}{}
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		c.sleepers = slices.DeleteFunc(c.sleepers, func(x *sleeper) bool { return x == s })
		return ctx.Err()
	}
}

// advance waits until a goroutine sleeps, moves the clock to the end of the
// earliest sleep and wakes every sleeper due by then.
func (c *fakeClock) advance(t *testing.T) {
	t.Helper()
	select {
	case <-c.asleep:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing sleeps on the clock")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sleepers) == 0 {
		return // that sleep ended with its context
	}
	next := c.sleepers[0].until
	for _, s := range c.sleepers {
		if s.until.Before(next) {
			next = s.until
		}
	}
	c.now = next
	c.sleepers = slices.DeleteFunc(c.sleepers, func(s *sleeper) bool {
		if s.until.After(next) {
			return false
		}
		close(s.wake)
		return true
	})
}

func TestScheduleFires(t *testing.T) {
	start := time.Date(2026, 11, 30, 23, 58, 30, 0, time.UTC)
	clock := newFakeClock(start)
	r := New(WithClock(clock))
	fired := make(chan events.EventBridgeEvent, 10)
	h := func(ctx context.Context, ev events.EventBridgeEvent) error {
		fired <- ev
		return nil
	}
	if err := r.AddFunction(Function{LogicalID: "Rotator", Handler: lambda.NewHandler(h)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddSchedule(ScheduleMapping{Function: "Rotator", Expression: "cron(0 0 1 * ? *)"}); err != nil {
		t.Fatal(err)
	}
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	want := []time.Time{
		time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC),
	}
	for i, w := range want {
		clock.advance(t) // the schedule sleeps until its next time; wake it there
		var ev events.EventBridgeEvent
		select {
		case ev = <-fired: // the invocation runs before the schedule sleeps again
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d did not fire", i)
		}
		if !ev.Time.Equal(w) || ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" || len(ev.Resources) != 1 {
			t.Errorf("event %d = %+v, want a Scheduled Event at %s", i, ev, w)
		}
		if now := clock.Now(); !now.Equal(w) {
			t.Errorf("event %d fired with the clock at %s, want %s", i, now, w)
		}
	}
}

func TestScheduleRejectsBadExpression(t *testing.T) {
	r := New()
	_ = r.AddFunction(Function{LogicalID: "F", Handler: lambda.NewHandler(func() error { return nil })})
	for _, expr := range []string{"rate(0 minutes)", "cron(* * * * * *)", "every day", ""} {
		if _, err := r.AddSchedule(ScheduleMapping{Function: "F", Expression: expr}); err == nil {
			t.Errorf("AddSchedule(%q) succeeded", expr)
		}
	}
	if _, err := r.AddSchedule(ScheduleMapping{Function: "Nope", Expression: "rate(1 hour)"}); !errors.Is(err, ErrUnknownFunction) {
		t.Errorf("unknown function: got %v", err)
	}
}

func TestInvokeDeadlineRequestIDAndPanic(t *testing.T) {
	r := New()
	var deadline time.Time
	var reqID string
	_ = r.AddFunction(Function{LogicalID: "Ok", Timeout: 7 * time.Second, Handler: lambda.NewHandler(func(ctx context.Context) (string, error) {
		deadline, _ = ctx.Deadline()
		lc, _ := lambdacontext.FromContext(ctx)
		reqID = lc.AwsRequestID
		return "ok", nil
	})})
	_ = r.AddFunction(Function{LogicalID: "Panics", Handler: lambda.NewHandler(func() error { panic("boom") })})
	_ = r.AddFunction(Function{LogicalID: "Slow", Timeout: 50 * time.Millisecond, Handler: lambda.NewHandler(func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})})
	start := time.Now()
	out, err := r.Invoke(context.Background(), "Ok", []byte(`{}`))
	if err != nil || string(out) != `"ok"` {
		t.Fatalf("got %s, %v", out, err)
	}
	if d := deadline.Sub(start); d < 6*time.Second || d > 8*time.Second {
		t.Errorf("deadline %s after start, want the function's 7 s timeout", d)
	}
	if len(reqID) != 36 {
		t.Errorf("request id %q, want a UUID", reqID)
	}
	if _, err := r.Invoke(context.Background(), "Panics", []byte(`{}`)); err == nil {
		t.Error("a panicking handler returned no error")
	}
	if _, err := r.Invoke(context.Background(), "Slow", []byte(`{}`)); err == nil {
		t.Error("a handler past its timeout returned no error")
	}
	stats := map[string]Stats{}
	for _, s := range r.Stats() {
		stats[s.Function] = s
	}
	if stats["Panics"].Errors != 1 || stats["Ok"].Errors != 0 || stats["Slow"].Errors != 1 {
		t.Errorf("stats %+v", stats)
	}
}

func TestBatchFailures(t *testing.T) {
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "a"}, {MessageId: "b"}, {MessageId: "c"}}}
	resp := func(ids ...string) []byte {
		var r events.SQSEventResponse
		for _, id := range ids {
			r.BatchItemFailures = append(r.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		b, _ := json.Marshal(r)
		return b
	}
	tests := []struct {
		name string
		out  []byte
		want int
	}{
		{"nothing returned", nil, 0},
		{"null", []byte("null"), 0},
		{"empty list", resp(), 0},
		{"one failure", resp("b"), 1},
		{"unknown id fails all", resp("zzz"), 3},
		{"empty id fails all", resp(""), 3},
		{"not json fails all", []byte("{"), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(batchFailures(tt.out, ev)); got != tt.want {
				t.Errorf("got %d failed, want %d", got, tt.want)
			}
		})
	}
}

// A held function is not invoked until released; an invocation waiting on
// the hold ends with its context; holding twice is refused.
func TestHold(t *testing.T) {
	r := New()
	var calls sync.WaitGroup
	ran := make(chan struct{}, 4)
	_ = r.AddFunction(Function{LogicalID: "F", Timeout: time.Minute, Handler: lambda.NewHandler(func() error {
		ran <- struct{}{}
		return nil
	})})
	release, err := r.Hold("F")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Hold("F"); err == nil {
		t.Fatal("holding a held function: no error")
	}
	if _, err := r.Hold("Nope"); !errors.Is(err, ErrUnknownFunction) {
		t.Fatalf("holding an unknown function: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Invoke(ctx, "F", []byte("{}")); !errors.Is(err, context.Canceled) {
		t.Fatalf("a held invocation whose context ended: %v", err)
	}
	calls.Add(1)
	go func() {
		defer calls.Done()
		if _, err := r.Invoke(context.Background(), "F", []byte("{}")); err != nil {
			t.Errorf("invoke after release: %v", err)
		}
	}()
	select {
	case <-ran:
		t.Fatal("a held function ran")
	case <-time.After(50 * time.Millisecond): // a negative check: nothing may happen
	}
	release()
	release() // twice is harmless
	calls.Wait()
	if len(ran) != 1 {
		t.Fatalf("after release the function ran %d times, want 1", len(ran))
	}
	if _, err := r.Hold("F"); err != nil {
		t.Fatalf("holding again after release: %v", err)
	}
}

// An invocation waiting on a hold, with a context that outlives the
// runner's stop (as a stream batch in flight has), ends when the runner
// stops: a held function does not keep the stop waiting.
func TestHoldEndsWithTheRunner(t *testing.T) {
	r := New()
	_ = r.AddFunction(Function{LogicalID: "F", Timeout: time.Minute, Handler: lambda.NewHandler(func() error { return nil })})
	if _, err := r.Hold("F"); err != nil {
		t.Fatal(err)
	}
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Invoke(context.Background(), "F", []byte("{}"))
		done <- err
	}()
	stop()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "held when the runner stopped") {
		t.Fatalf("a held invocation at the runner's stop: %v, want it refused", err)
	}
}

// waitUntil polls cond until it holds or timeout passes (the caller then
// checks what it needs and reports).
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// A schedule on a moved clock fires when the clock is moved past its
// time: a daily rotator fires when a rehearsal moves the clock days on,
// while the real clock has moved seconds.
func TestScheduleFiresOnAMovedClock(t *testing.T) {
	var offset atomic.Int64
	moved := MovedClock{At: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }}
	r := New(WithScheduleClock(moved))
	var fired atomic.Int32
	_ = r.AddFunction(Function{LogicalID: "Daily", Timeout: time.Minute, Handler: lambda.NewHandler(func() error {
		fired.Add(1)
		return nil
	})})
	if _, err := r.AddSchedule(ScheduleMapping{Function: "Daily", Expression: "rate(1 day)"}); err != nil {
		t.Fatal(err)
	}
	stop, err := r.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if n := fired.Load(); n != 0 {
		t.Fatalf("fired %d times before the clock moved", n)
	}
	// The schedule reads the clock when it starts, at a moment the test
	// does not see: move the clock a day on until it has fired.
	waitUntil(30*time.Second, func() bool {
		offset.Add(int64(25 * time.Hour))
		return fired.Load() >= 1
	})
	// Once per move however many days it passed: the waits above moved it
	// a day each, so the firings are at most the moves.
	if n := fired.Load(); n < 1 {
		t.Errorf("fired %d times after the clock moved days on, want at least 1", n)
	}
	offset.Add(int64(30 * 24 * time.Hour))
	before := fired.Load()
	waitUntil(30*time.Second, func() bool { return fired.Load() > before })
	time.Sleep(1500 * time.Millisecond) // a negative check: no catch-up may follow
	if n := fired.Load() - before; n != 1 {
		t.Errorf("a clock moved 30 days on fired the daily schedule %d times, want once", n)
	}
}
