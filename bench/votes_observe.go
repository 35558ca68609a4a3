package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

func functionStats(r *runner.Runner, fn string) runner.Stats {
	for _, s := range r.Stats() {
		if s.Function == fn {
			return s
		}
	}
	return runner.Stats{}
}

// keyFigures are the write units the DynamoDB proxy admitted (what AWS
// bills) on a run's keys, by kind, and the writes its key limit refused.
type keyFigures struct {
	ledger, counters, checkpoints float64
	throttled                     int64
}

// keyUnits attributes the units written between two snapshots of the
// proxy's keys: the poll's ledger keys (<poll>#<suffix>), its counter keys
// (count#<poll>#<shard>, or the naive consumer's naive#<poll>), and the
// tally's checkpoints (ckpt#<ledger table>), which every poll shares: a run
// is charged what they took while it ran.
func keyUnits(before, after []faultproxy.KeyStat, poll string) keyFigures {
	prev := map[[2]string]faultproxy.KeyStat{}
	for _, k := range before {
		prev[[2]string{k.Table, k.Key}] = k
	}
	var f keyFigures
	for _, k := range after {
		p := prev[[2]string{k.Table, k.Key}]
		units, throttled := k.AdmittedUnits-p.AdmittedUnits, k.Throttled-p.Throttled
		switch {
		case strings.HasPrefix(k.Key, poll+"#"):
			f.ledger += units
		case strings.HasPrefix(k.Key, "count#"+poll+"#"), k.Key == "naive#"+poll:
			f.counters += units
		case ledger.IsCheckpointPK(k.Key):
			f.checkpoints += units
		default:
			continue
		}
		f.throttled += throttled
	}
	return f
}

// sqsCounts are SQS requests on one queue, by kind.
type sqsCounts struct{ send, receive, delete, other int64 }

func (c sqsCounts) total() int64 { return c.send + c.receive + c.delete + c.other }

var (
	sqsObserved sync.Once
	sqsMu       sync.Mutex
	sqsByQueue  = map[string]*sqsCounts{} // by queue name
)

// queueRequests counts the SQS requests on the queue named name from now
// on (what the producer and the run's pollers send, empty receives
// included); the returned func reads the count.
func queueRequests(env *stack.Env, name string) func() sqsCounts {
	sqsObserved.Do(func() {
		env.Proxies[faultproxy.SQS].Observe(func(ex faultproxy.Exchange) {
			q := ex.Operation.QueueURL
			sqsMu.Lock()
			defer sqsMu.Unlock()
			c := sqsByQueue[q[strings.LastIndex(q, "/")+1:]]
			if c == nil {
				return
			}
			switch ex.Operation.Action {
			case "SendMessageBatch", "SendMessage":
				c.send++
			case "ReceiveMessage":
				c.receive++
			case "DeleteMessageBatch", "DeleteMessage":
				c.delete++
			default:
				c.other++
			}
		})
	})
	sqsMu.Lock()
	sqsByQueue[name] = &sqsCounts{}
	sqsMu.Unlock()
	return func() sqsCounts {
		sqsMu.Lock()
		defer sqsMu.Unlock()
		return *sqsByQueue[name]
	}
}

// emfSums adds up the metrics of the EMF lines written to it.
type emfSums struct {
	mu   sync.Mutex
	sums map[string]float64
}

func (e *emfSums) Write(p []byte) (int, error) {
	var doc map[string]any
	if json.Unmarshal(p, &doc) == nil {
		e.mu.Lock()
		if e.sums == nil {
			e.sums = map[string]float64{}
		}
		for k, v := range doc {
			if f, ok := v.(float64); ok {
				e.sums[k] += f
			}
		}
		e.mu.Unlock()
	}
	return len(p), nil
}

func (e *emfSums) get(name string) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sums[name]
}

// stackLog is the stack's function log (stack.Options.FunctionLog): the
// tally runs in the stack, so its EMF lines are the only view of each
// batch's lag; warnings and errors of every function are kept too.
var stackLog = &functionLog{}

// functionLog keeps, from the JSON lines written to it, the tally's and
// the search indexer's EMF lines and the warnings and errors, each with the
// time it was written.
type functionLog struct {
	mu       sync.Mutex
	tally    []tallyLine
	indexer  []indexerLine
	warnings []logLine
}

type tallyLine struct {
	at                                                time.Time
	counted, commits, moved, throttles, replayed, lag float64
	hasLag                                            bool
}

type logLine struct {
	at            time.Time
	function, msg string
}

func (l *functionLog) Write(p []byte) (int, error) {
	now := time.Now()
	for line := range strings.SplitSeq(string(p), "\n") {
		// Most lines are info logs: only parse the ones that matter.
		tally := strings.Contains(line, `"Function":"tally"`)
		indexer := strings.Contains(line, `"Function":"search-indexer"`) && strings.Contains(line, `"BulkRequests"`)
		warn := strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`)
		if !tally && !indexer && !warn {
			continue
		}
		var doc map[string]any
		if json.Unmarshal([]byte(line), &doc) != nil {
			continue
		}
		num := func(k string) float64 { f, _ := doc[k].(float64); return f }
		l.mu.Lock()
		if indexer {
			l.indexer = append(l.indexer, indexerLine{at: now, indexed: num("DocumentsIndexed"), deleted: num("DocumentsDeleted"),
				newer: num("StaleWritesRefused"), refused: num("DocumentsRefused"), requests: num("BulkRequests"),
				failed: num("IndexBatchesFailed"), lagMs: num("IndexLag")})
		} else if tally {
			lag, hasLag := doc["TallyLag"].(float64)
			l.tally = append(l.tally, tallyLine{at: now, counted: num("VotesCounted"), commits: num("TallyCommits"), moved: num("TallyCheckpointMoved"),
				throttles: num("Throttles"), replayed: num("TallyReplayed"), lag: lag, hasLag: hasLag})
		} else {
			fn, _ := doc["function"].(string)
			msg, _ := doc["msg"].(string)
			l.warnings = append(l.warnings, logLine{at: now, function: fn, msg: msg})
		}
		l.mu.Unlock()
	}
	return len(p), nil
}

// tallyFigures are the stack's tally's batches within a run.
type tallyFigures struct {
	batches                                      int
	counted, commits, moved, throttles, replayed float64
	lags                                         []float64 // TallyLag of each batch, seconds
	invocations                                  int
	handlerTime                                  time.Duration
}

func (l *functionLog) tallyBetween(from, to time.Time) tallyFigures {
	l.mu.Lock()
	defer l.mu.Unlock()
	var f tallyFigures
	for _, t := range l.tally {
		if t.at.Before(from) || t.at.After(to) {
			continue
		}
		f.batches++
		f.counted += t.counted
		f.commits += t.commits
		f.moved += t.moved
		f.throttles += t.throttles
		f.replayed += t.replayed
		if t.hasLag {
			f.lags = append(f.lags, t.lag)
		}
	}
	return f
}

// waitTally returns the tally's batches since from once they have counted
// n votes, or after 5 s: its EMF line comes just after the commit that a
// read of the counters may already have seen.
func (l *functionLog) waitTally(from time.Time, n int) tallyFigures {
	deadline := time.Now().Add(5 * time.Second)
	for {
		f := l.tallyBetween(from, time.Now())
		if f.counted >= float64(n) || time.Now().After(deadline) {
			return f
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// warningsSince counts the warnings and errors logged since t, by
// function and message.
func (l *functionLog) warningsSince(t time.Time) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, w := range l.warnings {
		if !w.at.Before(t) {
			out[fmt.Sprintf("%s: %s", cmp.Or(w.function, "runner"), w.msg)]++
		}
	}
	return out
}

// percentile is the nearest-rank p-th percentile of xs (NaN for none).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	return s[max(int(math.Ceil(p/100*float64(len(s))))-1, 0)]
}
