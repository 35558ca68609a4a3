package runner

import (
	"context"
	"sync"
	"time"
)

// Woken reads. Lambda reads each shard four times a second whether or not
// anything was written; locally those reads of quiet shards were most of
// an idle stack's CPU time and of DynamoDB Local's. A runner told of every
// write to a table (Wake; the local stack's DynamoDB proxy sees them all)
// reads that table's idle shards at once, so they may wait long between
// reads otherwise (WithIdlePollInterval) without delaying a record.

// defaultIdlePoll is the wait between reads of an idle shard of a mapping
// that leaves PollInterval to its default, when no WithIdlePollInterval.
const defaultIdlePoll = time.Second

// WithIdlePollInterval sets the wait between reads of an idle shard (one
// that returned nothing for idleReads reads in a row) for mappings that
// leave PollInterval to its default (default 1 s). Long waits suit a
// runner that is told of every write by Wake: a write ends the wait.
func WithIdlePollInterval(d time.Duration) Option {
	return func(r *Runner) {
		if d > 0 {
			r.idlePoll = d
		}
	}
}

// Wake tells the runner that table was written: the idle readers of its
// stream read now instead of at the end of their wait.
func (r *Runner) Wake(table string) {
	r.bell(table).ring()
}

// bell is table's, made on first use.
func (r *Runner) bell(table string) *bell {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bells == nil {
		r.bells = map[string]*bell{}
	}
	b := r.bells[table]
	if b == nil {
		b = &bell{}
		r.bells[table] = b
	}
	return b
}

// bell wakes every reader waiting on it when it rings.
type bell struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait is closed by the next ring. A reader takes it before it reads, so a
// write during the read ends the wait that follows.
func (b *bell) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *bell) ring() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// sleepUntil sleeps on the runner's clock for d, or until ch is closed or
// ctx is done, whichever comes first.
func (r *Runner) sleepUntil(ctx context.Context, d time.Duration, ch <-chan struct{}) {
	wake, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ch:
			cancel()
		case <-wake.Done():
		}
	}()
	_ = r.clock.Sleep(wake, d)
}
