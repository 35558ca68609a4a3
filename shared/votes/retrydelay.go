package votes

import "time"

// FirstRetryDelay is how long a vote failed back for the first time waits
// before it is delivered again; each later delivery waits twice as long,
// up to the queue's visibility timeout.
const FirstRetryDelay = 10 * time.Second

// RetryDelay is the wait before the next delivery of a vote the counter
// gave back on its receives-th delivery: FirstRetryDelay doubling, at most
// most. A backlog the store could not take then comes back soon (the store
// may serve again in seconds), and a store down for long spends the
// message's receives slowly: with most = 360 s, 20 receives last about
// 95 minutes before the dead-letter queue.
func RetryDelay(receives int, most time.Duration) time.Duration {
	d := FirstRetryDelay
	for i := 1; i < receives && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}
