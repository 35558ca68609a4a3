package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
	"github.com/ddbpipe/ddbpipe/shared/search"
	"github.com/ddbpipe/ddbpipe/shared/search/searchddb"
	"github.com/ddbpipe/ddbpipe/shared/search/searchos"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// Invariant is one property checked at the end, with its figures.
type Invariant struct {
	Name    string
	OK      bool
	Figures string
}

// Result is a soak's outcome.
type Result struct {
	Config     Config
	Began      time.Time
	LoadEnded  time.Time
	Crossing   time.Duration // from Began to the month's turn on the virtual clock
	Took       time.Duration
	Drained    time.Duration // from the load's end until the queues were empty and the counts settled
	Invariants []Invariant
	Faults     faultSummary
	Load       loadSummary
	Sizing     sizing // the votes' rates, and the store's ceiling they were sized from
	Rotations  []rotationRun
	Functions  []runner.Stats
	Judge      judgeStats // the IAM judge's time per request (zero with enforcement off)
	Leak       [4]leak    // before the load, idle after the drain, idle after each of two more bursts
	Timeline   *timeline
	Fuzz       string // the fuzz targets' log, when make soak ran them
}

// judgeStats is what the IAM judge took per judged request, over the
// whole soak: from its cache alone, or asking the evaluator.
type judgeStats struct {
	Requests, Cached, Asked int
	P50, P99, Max, AskedP99 time.Duration
}

// Violations counts the invariants that do not hold.
func (r *Result) Violations() int {
	n := 0
	for _, i := range r.Invariants {
		if !i.OK {
			n++
		}
	}
	return n
}

func (r *Result) add(name string, ok bool, format string, args ...any) {
	r.Invariants = append(r.Invariants, Invariant{Name: name, OK: ok, Figures: fmt.Sprintf(format, args...)})
}

// check lets the pipeline drain and checks every invariant.
func (s *soak) check(ctx context.Context, res *Result, base leak) {
	start := time.Now()
	v := s.env.Vars
	q := &queueOps{s: s}

	// Votes: the queue empties (killed batches come back after their
	// visibility timeout), dead letters are redriven, the counts settle.
	got, redriven := s.drain(ctx, q)
	res.Drained = time.Since(start)
	s.progress("drained in %s; the cold month's retirement and the checks follow", res.Drained.Round(time.Second))

	// The cold month retires, if the load's rotator runs did not get to it.
	for deadline := time.Now().Add(3 * time.Minute); !s.retired() && time.Now().Before(deadline) && ctx.Err() == nil; {
		s.rotate(ctx, "after the load")
	}
	prefix := v["LEDGER_TABLE_PREFIX"]
	cold, coldErr := s.rotator(s.rotatorNow()).Archive.Read(ctx, archive.Partition{Table: prefix, Month: coldMonth})

	// What should be counted: every distinct vote SQS took, except those
	// the counter rejected month-closed (arriving after their month retired)
	// that the retired month's archive does not hold: never counted, with
	// their reason. Those it holds are late copies of counted votes.
	late := s.checkRejects(ctx, res)
	lateCounted, lateNever := 0, 0
	for id := range late {
		if s.inArchive(cold.State, id) {
			lateCounted++
		} else {
			lateNever++
			s.load.mu.Lock()
			delete(s.load.accepted, id)
			s.load.mu.Unlock()
		}
	}
	want, months := s.load.expected()

	var lines []string
	ok := true
	var counted, expected int64
	for _, poll := range sortedKeys(polls) {
		t := got[poll]
		counted += t.Total
		for _, o := range polls[poll] {
			expected += want[poll][o]
			if t.Totals[o] != want[poll][o] {
				ok = false
				lines = append(lines, fmt.Sprintf("%s/%s counted %d, sent %d", poll, o, t.Totals[o], want[poll][o]))
			}
		}
	}
	sum := s.load.summary(time.Second)
	res.add("vote totals equal the distinct accepted votes", ok,
		"counted %d, distinct accepted %d (%d sends incl. %d duplicates on purpose, %d re-sent after failed sends; %d dead letters redriven; "+
			"%d rejected month-closed after %s retired: %d copies of counted votes, %d never counted)%s",
		counted, expected, sum.VotesSent, sum.Resent, sum.Retried, redriven, len(late), coldMonth, lateCounted, lateNever, listed(lines))

	s.checkArchive(ctx, res, months, cold, coldErr)
	s.checkObjects(ctx, res)
	s.checkListing(ctx, res)
	s.checkSearch(ctx, res)

	s.checkQueues(ctx, res, q, redriven)
	// Overload waits in the votes queue: a good vote is dead-lettered only
	// when the template's retry budget runs out, which a burst above the
	// store's ceiling must not exhaust.
	res.add("dead letters at most 1 % of the votes", float64(redriven) <= 0.01*float64(max(sum.DistinctAccepted, 1)),
		"%d dead letters for %d distinct accepted votes (%.2f %%)", redriven, sum.DistinctAccepted, 100*float64(redriven)/float64(max(sum.DistinctAccepted, 1)))

	if !s.cfg.NoLeakCheck {
		s.checkLeaks(ctx, res, q, base)
	}
	q.add(res)
}

// drain waits, up to 8 minutes, until the votes queue is empty, its dead
// letters are redriven and the counts hold still, and returns the last
// counts read and the dead letters redriven.
func (s *soak) drain(ctx context.Context, q *queueOps) (got map[string]votes.Totals, redriven int) {
	v := s.env.Vars
	store := votesddb.New(s.env.Clients.DynamoDB, v["COUNTERS_TABLE_NAME"], v["LEDGER_TABLE_PREFIX"])
	stable := 0
	rot := s.rotator(s.rotatorNow())
	// 8 minutes: on a slow DynamoDB Local the 10-minute soak redrives
	// thousands of dead letters (batches that ran out of time), which takes minutes.
	for deadline := time.Now().Add(8 * time.Minute); time.Now().Before(deadline) && pause(ctx, time.Second); {
		queued := q.depth(ctx, v["VOTES_QUEUE_URL"])
		if dl := q.depth(ctx, v["VOTES_DEAD_LETTER_QUEUE_URL"]); dl > 0 {
			redriven += q.redrive(ctx, v["VOTES_DEAD_LETTER_QUEUE_URL"], v["VOTES_QUEUE_URL"])
			continue
		}
		now := s.results(ctx, store)
		if queued == 0 && len(now) == len(polls) && sameCounts(now, got) && uncounted(ctx, rot) == 0 {
			stable++
		} else {
			stable = 0
		}
		got = now
		if stable >= 3 {
			break
		}
	}
	return got, redriven
}

// checkLeaks compares the idle state after the soak with the idle state
// after each of two more bursts of the same load.
func (s *soak) checkLeaks(ctx context.Context, res *Result, q *queueOps, base leak) {
	// Leaks: the long-running process (runner, proxies, HTTP API) and the
	// function processes. Its idle state after the soak is compared with
	// its idle state after each of two more bursts of the same load.
	// Connection pools and pollers fill up to their bounds with the first
	// (their goroutines and sockets move by a few dozen with how the burst
	// falls); a leak grows with the work, so it grows with the second too.
	after := s.idle()
	s.progress("idle after the soak: %d goroutines, %d open files; two more bursts of load to compare", after.Goroutines, after.FDs)
	again := s.burst(ctx, q)
	third := s.burst(ctx, q)
	res.Leak = [4]leak{base, after, again, third}
	procs := 0
	for _, n := range third.Processes {
		procs += n
	}
	grew := func(f func(leak) int) bool { return f(again) > f(after)+10 && f(third) > f(again)+10 }
	goroutines := func(l leak) int { return l.Goroutines }
	fds := func(l leak) int { return l.FDs }
	res.add("no goroutine, connection or process leak", !grew(goroutines) && !grew(fds) && procs == 0,
		"idle after the soak → after one more %s burst → after another: goroutines %d → %d → %d (and of idle keep-alive connections %d → %d → %d), open files and sockets %d → %d → %d (and idle keep-alive sockets %d → %d → %d) "+
			"(a leak: more than +10 after each burst); function processes left 30 s after they are reclaimed: %d (before the load: %d goroutines, %d files)",
		s.cfg.LeakBurst, after.Goroutines, again.Goroutines, third.Goroutines, after.Pooled, again.Pooled, third.Pooled,
		after.FDs, again.FDs, third.FDs, after.IdleSockets, again.IdleSockets, third.IdleSockets, procs, base.Goroutines, base.FDs)
}

// burst runs LeakBurst of the load, lets the votes queue empty and
// returns the idle state after it.
func (s *soak) burst(ctx context.Context, q *queueOps) leak {
	burst, stop := context.WithTimeout(ctx, s.cfg.LeakBurst)
	var wg sync.WaitGroup
	wg.Go(func() { s.produceVotes(burst) })
	for i := range s.cfg.ObjectWorkers {
		wg.Go(func() { s.objectWorker(burst, i) })
	}
	wg.Wait()
	stop()
	queue := s.env.Vars["VOTES_QUEUE_URL"]
	for deadline := time.Now().Add(time.Minute); q.depth(ctx, queue) != 0 && time.Now().Before(deadline) && pause(ctx, time.Second); {
	}
	l := s.idle()
	s.progress("idle after a %s burst: %d goroutines, %d open files", s.cfg.LeakBurst, l.Goroutines, l.FDs)
	return l
}

// idle lets the pollers settle, reclaims the function processes as Lambda
// reclaims idle environments (one still busy is reclaimed once its
// invocation ends: a scheduled reaper run may be under way), and measures
// this process. A function process left after 30 s is a leak.
func (s *soak) idle() leak {
	time.Sleep(3 * time.Second)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left := 0
		for _, p := range s.env.Processes {
			p.Trim()
			left += len(p.PIDs())
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
	}
	return leakBaseline(s)
}

func listed(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	if len(lines) > 6 {
		lines = append(lines[:6], fmt.Sprintf("… %d more", len(lines)-6))
	}
	return "; " + strings.Join(lines, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (s *soak) results(ctx context.Context, store *votesddb.Votes) map[string]votes.Totals {
	out := map[string]votes.Totals{}
	for poll := range polls {
		if t, err := votes.Results(ctx, store, poll, time.Now); err == nil {
			out[poll] = t
		}
	}
	return out
}

func sameCounts(a, b map[string]votes.Totals) bool {
	for poll := range polls {
		if fmt.Sprint(a[poll].Totals) != fmt.Sprint(b[poll].Totals) {
			return false
		}
	}
	return true
}

// uncounted is how many records the open ledger streams hold past the
// tally's checkpoints (-1 when they cannot be read): the counts settle
// only at 0, not merely when they stop moving for a while.
func uncounted(ctx context.Context, r *archive.Rotator) int {
	lags, err := r.StreamLags(ctx, false, true)
	if err != nil {
		return -1
	}
	n := 0
	for _, l := range lags {
		n += l.Uncounted
	}
	return n
}

// queueOps reads the queues' depths and redrives dead letters with the
// votes flow's own operator code (votessqs), as `ddbpipe votes dlq
// redrive` does, and keeps what failed: the faults are off while the soak
// drains and checks, so a failed call is an invariant problem.
type queueOps struct {
	s      *soak
	failed int
	first  error
}

func (q *queueOps) fail(err error) {
	if q.failed == 0 {
		q.s.progress("a queue call failed (the invariants count it): %v", err)
	}
	q.failed++
	if q.first == nil {
		q.first = err
	}
}

// depth is a queue's visible plus in-flight messages (-1 when it cannot
// be read).
func (q *queueOps) depth(ctx context.Context, url string) int {
	visible, inFlight, err := votessqs.Depth(ctx, q.s.env.Clients.SQS, url)
	if err != nil {
		q.fail(err)
		return -1
	}
	return visible + inFlight
}

// redrive moves a dead-letter queue's messages back to the votes queue
// and returns how many it moved.
func (q *queueOps) redrive(ctx context.Context, from, to string) int {
	res, err := votessqs.Redrive(ctx, q.s.env.Clients.SQS, from, to, votessqs.RedriveOptions{})
	if err != nil {
		q.fail(fmt.Errorf("redrive (%d moved, %d not moved, %d sent but not deleted): %w", res.Moved, res.Failed, res.Undeleted, err))
	}
	return res.Moved
}

// add is the invariant on the queue calls.
func (q *queueOps) add(res *Result) {
	res.add("every queue depth read and dead letter redriven without error", q.failed == 0,
		"%d failed calls to votessqs.Depth and votessqs.Redrive while draining and checking%s", q.failed, firstError(q.first))
}

func firstError(err error) string {
	if err == nil {
		return ""
	}
	return "; first: " + err.Error()
}

var markerRE = regexp.MustCompile(`bad-\d{7}|v-\d{7}`)

// checkRejects reads the rejects queue: every invalid message is there with
// its reason, and no valid vote is but those rejected month-closed, which
// it returns by voteId.
func (s *soak) checkRejects(ctx context.Context, res *Result) (late map[string]bool) {
	late = map[string]bool{}
	c := s.env.Clients.SQS
	url := s.env.Vars["VOTES_REJECTS_QUEUE_URL"]
	reasons := map[string][]votes.Reason{} // marker → the reason of each copy
	copies, validRejected, unmatched := 0, 0, 0
	byReason := map[votes.Reason]int{}
	for empty := 0; empty < 2; {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600})
		if err != nil || len(out.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range out.Messages {
			copies++
			var r votessqs.RejectMessage
			if json.Unmarshal([]byte(aws.ToString(m.Body)), &r) != nil || r.Reason == "" {
				unmatched++
				continue
			}
			byReason[r.Reason]++
			marker := markerRE.FindString(r.Body)
			switch {
			case strings.HasPrefix(marker, "v-") && r.Reason == votes.ReasonMonthClosed:
				late[marker] = true
			case strings.HasPrefix(marker, "v-"):
				validRejected++
			case marker == "":
				unmatched++
			default:
				reasons[marker] = append(reasons[marker], r.Reason)
			}
		}
	}
	s.load.mu.Lock()
	bad := map[string]badSent{}
	for k, v := range s.load.bad {
		bad[k] = v
	}
	s.load.mu.Unlock()
	want := map[string]votes.Reason{}
	for _, b := range badVotes {
		want[b.kind] = b.want
	}
	// A copy read after its month closed is rejected month-closed before
	// any other check; every other copy must carry the kind's reason.
	fence := votes.Fence{Grace: graceDays * ledger.Day}
	missing, wrong := 0, 0
	for marker, b := range bad {
		got, ok := reasons[marker]
		if !ok {
			missing++
			continue
		}
		for _, r := range got {
			closed := r == votes.ReasonMonthClosed && want[b.kind] != votes.ReasonMalformedJSON && fence.Accepts(b.castAt, s.clock.Now()) != nil
			if r != want[b.kind] && !closed {
				wrong++
				break
			}
		}
	}
	res.add("every reject has its reason and none was counted", missing == 0 && wrong == 0 && validRejected == 0 && unmatched == 0,
		"%d invalid messages sent, %d on the rejects queue (%d copies: a send retried after a lost answer), %d missing, %d with another reason; by reason %v; valid votes rejected: %d; unreadable rejects: %d",
		len(bad), len(reasons), copies, missing, wrong, byReason, validRejected, unmatched)
	return late
}

// inArchive reports whether a vote's ledger item is in an archived state.
func (s *soak) inArchive(state archive.State, voteID string) bool {
	s.load.mu.Lock()
	v, ok := s.load.accepted[voteID]
	s.load.mu.Unlock()
	if !ok {
		return false
	}
	pk, sk := votes.Entry{Vote: v}.LedgerKey()
	key, err := archive.KeyJSON(archive.Item{"pk": pk, "sk": sk}, "pk", "sk")
	_, found := state[key]
	return err == nil && found
}

// rotator is the rotator as its function wires it, on a given clock.
func (s *soak) rotator(now time.Time) *archive.Rotator {
	v := s.env.Vars
	r := archivelambda.NewRotation(s.env.AWS, archivelambda.RotatorConfig{
		LedgerPrefix: v["LEDGER_TABLE_PREFIX"], Bucket: v["ARCHIVE_BUCKET_NAME"], GraceDays: graceDays,
		Archiver: v["ARCHIVER_FUNCTION_ARN"], FailureQueueARN: s.env.Stack.Resources["StreamFailuresQueue"].Attrs["Arn"],
		MaxRetryAttempts: 5, MaxRecordAgeSeconds: 21600, WindowSeconds: 1,
		Tally: v["TALLY_FUNCTION_ARN"], TallyWindowSeconds: 60, TallyBatchWindow: 1, CountersTable: v["COUNTERS_TABLE_NAME"],
	}, s.log.With("function", "RotatorFunction"))
	r.Now = func() time.Time { return now }
	r.Policy.DrainWait, r.Policy.DrainPoll = 20*time.Second, time.Second
	return r
}

// checkArchive compares each month's archive with its ledger: October's (retired: the
// table is gone, so with the distinct votes cast in October, which the
// rotator verified against the table before deleting it) and November's
// (live: archive replayed against a scan of the table).
func (s *soak) checkArchive(ctx context.Context, res *Result, months map[string]int, c archive.Contents, err error) {
	prefix := s.env.Vars["LEDGER_TABLE_PREFIX"]
	r := s.rotator(s.rotatorNow())
	tables, listErr := r.Tables.List(ctx, prefix)
	gone := listErr == nil
	for _, t := range tables {
		gone = gone && t.Name != s.ledgerTable(coldMonth)
	}
	counters, checked := s.coldCounters()
	res.add("the archive of the retired month equals its ledger", s.retired() && err == nil && len(c.State) == months[coldMonth] && gone &&
		checked && counters.Differ() == 0,
		"%s: retired %v, table deleted %v; archive replays to %d items in %d files, distinct votes cast that month %d (read error: %v); at retirement %s",
		coldMonth, s.retired(), gone, len(c.State), len(c.Files), months[coldMonth], err, countersFigure(counters, checked))

	var rep archive.Report
	var items int
	for deadline := time.Now().Add(2 * time.Minute); ; {
		c, err := r.Archive.Read(ctx, archive.Partition{Table: prefix, Month: liveMonth})
		scan, serr := r.Tables.Scan(ctx, s.ledgerTable(liveMonth), false)
		if err == nil && serr == nil {
			rep = archive.Verify(c.State, scan.State)
			items = len(scan.State)
			if rep.OK() {
				break
			}
		}
		if time.Now().After(deadline) || !pause(ctx, 2*time.Second) {
			break
		}
	}
	res.add("the archive of the live month equals its ledger", rep.OK() && items == months[liveMonth],
		"%s: %s; ledger %d items, distinct votes cast that month %d", liveMonth, rep, items, months[liveMonth])
}

func countersFigure(c archive.CountersCheck, checked bool) string {
	if !checked {
		return "no run compared the counters with the archive"
	}
	return c.String()
}

// checkObjects: no dangling reference once the reaper has caught up, no
// orphan after the sweeper has run with its clock past the grace, every
// read verified.
// checkListing compares the listing of every soak object with the
// table's own v0 items (a Scan): the same keys, each at its latest
// version with its SHA-256, and no deleted object.
func (s *soak) checkListing(ctx context.Context, res *Result) {
	c, err := objectsclient.NewSigned(s.env.APIURL, s.env.AWS, &http.Client{Timeout: time.Minute})
	if err != nil {
		res.add("the listing equals the table's live objects", false, "client: %v", err)
		return
	}
	got := map[string]string{} // key → version/sha256
	for it, err := range c.List(ctx, "soak/", objectsclient.ListOptions{PageSize: 25}) {
		if err != nil {
			res.add("the listing equals the table's live objects", false, "listing: %v", err)
			return
		}
		got[it.Entry.Key] = fmt.Sprintf("v%d/%s", it.Entry.Version, it.Entry.SHA256)
	}
	live := map[string]string{}
	p := dynamodb.NewScanPaginator(s.env.Clients.DynamoDB, &dynamodb.ScanInput{
		TableName:                 aws.String(s.env.Vars["OBJECTS_TABLE_NAME"]),
		FilterExpression:          aws.String("begins_with(pk, :p) AND sk = :v0 AND attribute_not_exists(deleted)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: "soak/"}, ":v0": &ddbtypes.AttributeValueMemberS{Value: objects.LatestSortKey}},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			res.add("the listing equals the table's live objects", false, "scan: %v", err)
			return
		}
		for _, item := range page.Items {
			k, _ := item["pk"].(*ddbtypes.AttributeValueMemberS)
			v, _ := item["version"].(*ddbtypes.AttributeValueMemberN)
			h, _ := item["sha256"].(*ddbtypes.AttributeValueMemberS)
			if k != nil && v != nil && h != nil {
				live[k.Value] = "v" + v.Value + "/" + h.Value
			}
		}
	}
	var diff []string
	for k, want := range live {
		if got[k] != want {
			diff = append(diff, fmt.Sprintf("%s: listed %q, table %q", k, got[k], want))
		}
	}
	for k := range got {
		if _, ok := live[k]; !ok {
			diff = append(diff, k+": listed, not live")
		}
	}
	slices.Sort(diff)
	res.add("the listing equals the table's live objects", len(diff) == 0 && len(live) > 0,
		"%d live objects in the table, %d listed (pages of 25); %d differ%s", len(live), len(got), len(diff), listed(diff))
}

// checkSearch holds the search index to the objects table once the
// stream drains: every live key at its version, no deleted key, whatever
// the faults replayed, retried, reordered or dropped on the way (the
// search engine's restart among them). It compares again for up to two
// minutes: the index follows the table by the stream's delay.
func (s *soak) checkSearch(ctx context.Context, res *Result) {
	const name = "the search index equals the table"
	alias := s.env.Vars["SEARCH_INDEX_NAME"]
	if alias == "" {
		return // a stack without search
	}
	engine, err := searchos.FromAWS(s.env.AWS, "", alias)
	if err != nil {
		res.add(name, false, "engine: %v", err)
		return
	}
	table := searchddb.New(s.env.Clients.DynamoDB, s.env.Vars["OBJECTS_TABLE_NAME"])
	var d search.Drift
	for deadline := time.Now().Add(2 * time.Minute); ; {
		d, err = search.Verify(ctx, table, engine)
		if err == nil && d.None() || time.Now().After(deadline) || !pause(ctx, 2*time.Second) {
			break
		}
	}
	if err != nil {
		res.add(name, false, "verify: %v", err)
		return
	}
	var lines []string
	for _, e := range d.Missing {
		lines = append(lines, fmt.Sprintf("%s v%d: missing from the index", e.Key, e.Version))
	}
	for _, e := range d.Extra {
		lines = append(lines, fmt.Sprintf("%s v%d: indexed, not live", e.Key, e.Version))
	}
	for _, m := range append(d.Behind, d.Ahead...) {
		lines = append(lines, fmt.Sprintf("%s: table v%d, index v%d", m.Key, m.Table, m.Index))
	}
	res.add(name, d.None() && d.TableKeys > 0,
		"%d live keys in the table, %d documents in the index; %d drift (missing %d, extra %d, behind %d, ahead %d)%s",
		d.TableKeys, d.IndexDocs, d.Count(), len(d.Missing), len(d.Extra), len(d.Behind), len(d.Ahead), listed(lines))
}

func (s *soak) checkObjects(ctx context.Context, res *Result) {
	v := s.env.Vars
	refs := objectsddb.NewRefs(s.env.Clients.DynamoDB, v["OBJECTS_TABLE_NAME"])
	bucket := objectss3.NewBucket(s.env.Clients.S3, v["OBJECTS_BUCKET_NAME"])
	var rep objects.Report
	var err error
	for deadline := time.Now().Add(time.Minute); ; {
		rep, err = objects.Check(ctx, refs, bucket)
		if err == nil && rep.DanglingErr() == nil || time.Now().After(deadline) || !pause(ctx, time.Second) {
			break
		}
	}
	res.add("no dangling object reference", err == nil && rep.DanglingErr() == nil,
		"%d items, %d versions, %d references, %d blobs, %d chunks; dangling: %d (%v)", rep.Items, rep.Versions, rep.References, rep.Blobs, rep.Chunks, len(rep.Dangling), firstErr(err, rep.DanglingErr()))
	orphansBefore := len(rep.OrphanBlobs) + len(rep.OrphanChunks)

	// The sweeper, as its function wires it, with its clock past the grace
	// (the template's OrphanGraceMinutes), twice: a chunk goes on the first
	// sweep a grace after the one that marked it.
	grace := 60 * time.Minute
	var swept, chunks int
	var dropped, released int
	for i := 1; i <= 2; i++ {
		now := time.Now().Add(time.Duration(i) * (grace + time.Minute))
		sw := objectslambda.NewSweeper(s.env.Clients.DynamoDB, s.env.Clients.S3, v["OBJECTS_TABLE_NAME"], v["OBJECTS_BUCKET_NAME"], grace, func() time.Time { return now }, s.log)
		r := sw.Sweep(ctx)
		swept += r.Swept
		chunks += r.ChunksSwept
		dropped += r.RefsDropped
		released += r.SharedReleased
	}
	after, err := objects.Check(ctx, refs, bucket)
	s.load.mu.Lock()
	mismatches := append([]string(nil), s.load.mismatch...)
	verified := s.load.ops["get verified"]
	s.load.mu.Unlock()
	res.add("no orphan blob after the sweeps", err == nil && after.Err() == nil,
		"orphans before the sweeps: %d; swept %d blob versions (%d shared blobs released, %d stale reference records dropped) and %d chunks; after: %d orphan blobs, %d orphan chunks, %d stale reference records, %d dangling (%v)",
		orphansBefore, swept, released, dropped, chunks, len(after.OrphanBlobs), len(after.OrphanChunks), len(after.OrphanRefs), len(after.Dangling), firstErr(err, after.Err()))
	s.checkShared(ctx, res, refs)
	res.add("every read checksum-verified", len(mismatches) == 0 && verified > 0,
		"%d reads verified (SHA-256 of the body = the API's, and a body this soak wrote for the key); %d not%s", verified, len(mismatches), listed(mismatches))
}

// checkShared: the keys holding the shared workers' bodies reference the
// one shared blob of their body, unless the write that stored the key's
// version met that blob's head being deleted and kept a blob of its own,
// as the design allows and the write logs (objects.OwnBlobLog). The
// workers delete at random, so no key may be left: once the pipeline is
// quiet, each body is written once more under a key of its own, which
// must take the shared blob (stored, or stored again if the reaper freed
// it).
func (s *soak) checkShared(ctx context.Context, res *Result, refs *objectsddb.Refs) {
	var settleErr error
	if c, err := objectsclient.NewSigned(s.env.APIURL, s.env.AWS, &http.Client{Timeout: 30 * time.Second}); err != nil {
		settleErr = err
	} else {
		for i, b := range sharedBodies {
			if _, err := c.Put(ctx, fmt.Sprintf("%sfinal-%d", sharedPrefix, i), b, objectsclient.PutOptions{ContentType: "application/octet-stream"}); err != nil {
				settleErr = errors.Join(settleErr, err)
			}
		}
	}
	bodies := map[string]bool{}
	for _, b := range sharedBodies {
		bodies[objects.ContentKey(objects.SumOf(b), int64(len(b)))] = true
	}
	live, viaShared, finalShared := 0, 0, 0
	named := map[string]bool{}
	var unexplained []string
	err := refs.Scan(ctx, func(e objects.ItemRef) {
		if !strings.HasPrefix(e.PK, sharedPrefix) || e.SK != objects.LatestSortKey || e.Deleted {
			return
		}
		live++
		switch {
		case bodies[e.BlobKey]:
			viaShared++
			named[e.BlobKey] = true
			if strings.HasPrefix(e.PK, sharedPrefix+"final-") {
				finalShared++
			}
		default:
			if logged, _ := s.own.logged(e.WriteID); !logged {
				unexplained = append(unexplained, fmt.Sprintf("%s v%d (write %s, blob %s)", e.PK, e.Version, e.WriteID, e.BlobKey))
			}
		}
	})
	s.load.mu.Lock()
	puts := s.load.ops["shared put ok"]
	s.load.mu.Unlock()
	_, keptOwn := s.own.logged("")
	slices.Sort(unexplained)
	res.add("same bytes stored once", err == nil && settleErr == nil && puts > 0 && finalShared == len(sharedBodies) &&
		len(named) == len(sharedBodies) && len(unexplained) == 0,
		"%d PUTs of %d bodies under %d keys, and each once more after the drain (%d of %d through the shared blob); at the end %d live keys hold them, %d through %d shared blobs, %d through blobs of their own; %d writes logged keeping a blob of their own (their shared blob being deleted), and %d live keys hold one that no such write logged%s (%v)",
		puts, len(sharedBodies), sharedKeys, finalShared, len(sharedBodies), live, viaShared, len(named), live-viaShared, keptOwn, len(unexplained), listed(unexplained), errors.Join(err, settleErr))
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func countObjects(ctx context.Context, c *s3.Client, bucket, prefix string) int {
	n := 0
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return -1
		}
		n += len(page.Contents)
	}
	return n
}

// pause waits d, or less when ctx ends (Ctrl-C): it reports whether the
// caller's loop should go on.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// checkQueues: every queue the pipeline dead-letters to is accounted for
// (the dead letters were redriven and counted before).
func (s *soak) checkQueues(ctx context.Context, res *Result, q *queueOps, redriven int) {
	v := s.env.Vars
	failures := q.depth(ctx, v["STREAM_FAILURES_QUEUE_URL"])
	quarantined := countObjects(ctx, s.env.Clients.S3, v["ARCHIVE_BUCKET_NAME"], archive.QuarantinePrefix)
	left := q.depth(ctx, v["VOTES_QUEUE_URL"]) + q.depth(ctx, v["VOTES_DEAD_LETTER_QUEUE_URL"])
	var failed []string
	if failures != 0 {
		failed = s.streamFailures(ctx, v["STREAM_FAILURES_QUEUE_URL"])
	}
	res.add("every dead letter, failure and quarantine accounted for", failures == 0 && quarantined == 0 && left == 0,
		"votes queue and its dead-letter queue: %d left (%d dead letters redriven and counted); stream failures queue: %d; archive quarantine: %d objects%s",
		left, redriven, failures, quarantined, listed(failed))
}

// streamFailures reads the stream-failure queue's messages (the places of
// the batches Lambda gave up on) and says whose batch each was, and why.
func (s *soak) streamFailures(ctx context.Context, url string) []string {
	msgs, err := votessqs.Peek(ctx, s.env.Clients.SQS, url, 0, time.Minute)
	var out []string
	for _, m := range msgs {
		var f ddbstream.Failure
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &f); err != nil || f.Batch == nil {
			out = append(out, fmt.Sprintf("unreadable: %.200q", aws.ToString(m.Body)))
			continue
		}
		out = append(out, fmt.Sprintf("%s gave up at %s (%s after %d invocations): %d records of %s shard %s from %s",
			f.RequestContext.FunctionARN, f.Timestamp, f.RequestContext.Condition, f.RequestContext.ApproximateInvokeCount,
			f.Batch.BatchSize, f.Batch.StreamARN, f.Batch.ShardID, f.Batch.FirstArrival))
	}
	if err != nil {
		out = append(out, fmt.Sprintf("reading the queue: %v", err))
	}
	return out
}
