package votes

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A store that throttles every write makes the counter shed to one put in
// flight, and give back what it could not write, losing nothing; once the
// store serves again the bound grows back and the next batch is written.
func TestCountShedsItsPutsWhileTheStoreThrottles(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
	throttle := true
	store.fail = func(Entry, bool) error {
		if throttle {
			return fmt.Errorf("%w: slow down", ErrThrottled)
		}
		return nil
	}
	c := newCounter(store, &memRejects{})
	c.Margin = time.Millisecond
	batch := func(from int) []Message {
		var msgs []Message
		for i := from; i < from+100; i++ {
			msgs = append(msgs, msg(fmt.Sprint("m", i), vote(fmt.Sprint("v", i), "p", "a", fmt.Sprint("u", i))))
		}
		return msgs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res := c.Count(ctx, batch(0))
	if res.Parallel != 1 || len(res.Failed) != 100 || res.Accepted != 0 {
		t.Fatalf("throttled batch: parallel %d, %d failed back, %d accepted; want 1, 100, 0", res.Parallel, len(res.Failed), res.Accepted)
	}
	// After the first throttles, one put at a time: far fewer writes than
	// 16 workers retrying together would have sent.
	store.mu.Lock()
	store.maxInFlight, store.inFlight = 0, 0
	store.mu.Unlock()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	c.Count(ctx2, batch(100))
	if store.maxInFlight > 1 {
		t.Errorf("while shed: %d puts in flight at once, want 1", store.maxInFlight)
	}

	throttle = false
	res = c.Count(context.Background(), batch(200))
	if res.Accepted != 100 || len(res.Failed) != 0 {
		t.Fatalf("the store serves again: %d accepted, %d failed back", res.Accepted, len(res.Failed))
	}
	if res.Parallel <= 1 {
		t.Errorf("after 100 writes that landed the bound is still %d", res.Parallel)
	}
	for i := range 5 {
		res = c.Count(context.Background(), batch(300+100*i))
	}
	if res.Parallel != c.Parallel {
		t.Errorf("after 600 writes that landed the bound is %d, want back at %d", res.Parallel, c.Parallel)
	}
}

func TestShedderHalvesAndGrows(t *testing.T) {
	s := newShedder(16)
	ctx := context.Background()
	for _, want := range []int{8, 4, 2, 1, 1} {
		if err := s.acquire(ctx); err != nil {
			t.Fatal(err)
		}
		s.release(overload)
		if got := s.bound(); got != want {
			t.Fatalf("bound %d after a failure, want %d", got, want)
		}
	}
	// At a bound of 1, a second acquire waits until the first ends.
	_ = s.acquire(ctx)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := s.acquire(short); err == nil {
		t.Fatal("a second write got in past a bound of 1")
	}
	s.release(landed)
	if got := s.bound(); got != 2 {
		t.Errorf("bound %d after a success at 1, want 2", got)
	}
}

// Writes cut off by the counter's own deadline say nothing of the store:
// a batch that ends with its writes in flight keeps the bound. (Counted as
// failures, each such batch halved it, and a soak's counter, whose every
// batch ran into its deadline while DynamoDB Local was slow, sat at one
// put in flight.)
func TestCountKeepsItsBoundWhenItsDeadlineCutsWrites(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	store.fail = func(Entry, bool) error {
		<-ctx.Done() // every put outlasts the invocation
		return fmt.Errorf("put: %w", ctx.Err())
	}
	c := newCounter(store, &memRejects{})
	c.Margin = 100 * time.Millisecond
	var msgs []Message
	for i := range 100 {
		msgs = append(msgs, msg(fmt.Sprint("m", i), vote(fmt.Sprint("v", i), "p", "a", fmt.Sprint("u", i))))
	}
	res := c.Count(ctx, msgs)
	if res.Parallel != DefaultParallel || len(res.Late) != 100 || store.puts != DefaultParallel {
		t.Errorf("bound %d, %d given back late after %d puts; want %d, 100 and %d", res.Parallel, len(res.Late), store.puts, DefaultParallel, DefaultParallel)
	}
}

// Writes that are answered keep the bound however long they take:
// DynamoDB tells a load it cannot take by throttling. (Shedding on slow
// writes too admitted 30 of a throttled table's 50 units/s in the overload
// bench, a drain 1.66x the ideal; without it, 43 and 1.15x.)
func TestCountKeepsItsBoundWhileSlowWritesLand(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
	store.fail = func(Entry, bool) error {
		time.Sleep(30 * time.Millisecond)
		return nil
	}
	c := newCounter(store, &memRejects{})
	var msgs []Message
	for i := range 100 {
		msgs = append(msgs, msg(fmt.Sprint("m", i), vote(fmt.Sprint("v", i), "p", "a", fmt.Sprint("u", i))))
	}
	if res := c.Count(context.Background(), msgs); res.Accepted != 100 || res.Parallel != DefaultParallel {
		t.Errorf("slow writes: %d accepted, bound %d; want 100 and %d", res.Accepted, res.Parallel, DefaultParallel)
	}
}
