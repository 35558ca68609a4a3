package votes

import (
	"context"
	"sync"
)

// shedder bounds the counter's ledger writes in flight, across the
// batches of one execution environment, by what the store serves: the
// bound halves when a write is throttled or fails (a store slower than its
// arrivals answers with timeouts), and grows back by one for every bound's
// worth of writes that succeed (additive increase, multiplicative
// decrease). Under overload the counter then keeps a few writes going that
// land, instead of many that time out together; the votes it does not reach
// before its deadline go back to the queue and wait there.
type shedder struct {
	mu       sync.Mutex
	limit    float64 // writes allowed in flight, 1 to most
	most     int
	inFlight int
	wake     chan struct{} // closed when a write ends
}

func newShedder(most int) *shedder {
	return &shedder{limit: float64(most), most: most, wake: make(chan struct{})}
}

// acquire waits for room for one more write, or for ctx's end.
func (s *shedder) acquire(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.inFlight < int(s.limit) {
			s.inFlight++
			s.mu.Unlock()
			return nil
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// writeEnd is what a write's end says of the store.
type writeEnd int

const (
	landed   writeEnd = iota // answered: the bound grows
	overload                 // throttled or failed: the bound halves
	cutOff                   // cut off by its caller: nothing
)

// release ends a write.
func (s *shedder) release(end writeEnd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	switch end {
	case overload:
		s.limit = max(1, s.limit/2)
	case landed:
		s.limit = min(float64(s.most), s.limit+1/s.limit)
	}
	close(s.wake)
	s.wake = make(chan struct{})
}

// bound is the writes now allowed in flight.
func (s *shedder) bound() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.limit)
}
