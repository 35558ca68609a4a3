package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/objects/bodies"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// The polls of the soak: one with a hot option, one spread over ten.
var polls = map[string][]string{
	"soak-hot":    {"a", "b", "c"},
	"soak-spread": {"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"},
}

// loadState is what the workload sent and saw: the expected results.
type loadState struct {
	mu sync.Mutex
	// accepted are the distinct votes SQS took, by voteId.
	accepted map[string]votes.Vote
	sends    int                // votes handed to SQS, duplicates included
	resent   int                // duplicates sent on purpose (a vote again, same voteId)
	retried  int                // votes sent again after a failed Send
	bad      map[string]badSent // by marker, bad messages SQS took

	// objects
	written  map[string]map[string]bool // key → sha256 of every body PUT (sent, whatever the answer)
	ops      map[string]int             // "put ok", "get verified", ... → count
	placed   map[string]int             // kind → PUTs stored so
	mismatch []string                   // reads that returned bytes never written
	perSec   []int                      // object operations finished, by second of the run
	began    time.Time
}

func newLoadState() *loadState {
	return &loadState{accepted: map[string]votes.Vote{}, bad: map[string]badSent{}, written: map[string]map[string]bool{},
		ops: map[string]int{}, placed: map[string]int{}, began: time.Now()}
}

// badSent is one invalid message SQS took: its kind, and the castAt it
// carries (a bad vote cast in October and read after October closed is
// rejected month-closed, which is right too: the fence comes first).
type badSent struct {
	kind   string
	castAt time.Time
}

func (l *loadState) votesSent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sends
}

func (l *loadState) distinctAccepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

func (l *loadState) badSent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.bad)
}

func (l *loadState) objectOps() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.ops {
		n += c
	}
	return n
}

// expected are the distinct accepted votes per poll and option, and per month.
func (l *loadState) expected() (totals map[string]map[string]int64, months map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	totals, months = map[string]map[string]int64{}, map[string]int{}
	for _, v := range l.accepted {
		if totals[v.PollID] == nil {
			totals[v.PollID] = map[string]int64{}
		}
		totals[v.PollID][v.OptionID]++
		months[ledger.MonthOf(v.CastAt)]++
	}
	return totals, months
}

// setupVotes creates the polls through the votes API.
func (s *soak) setupVotes(ctx context.Context) error {
	for id, options := range polls {
		body := fmt.Sprintf(`{"pollId":%q,"options":["%s"],"shards":8}`, id, strings.Join(options, `","`))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.env.APIURL+"/polls", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.api.Do(req)
		if err != nil {
			return fmt.Errorf("soak: create poll %s: %w", id, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("soak: create poll %s: HTTP %d", id, resp.StatusCode)
		}
	}
	return nil
}

// badVotes are the invalid messages mixed into the flood; each carries its
// marker so the rejects queue can be matched to them.
var badVotes = []struct {
	kind string
	body func(marker, castAt string) string
	want votes.Reason
}{
	{"malformed JSON", func(m, _ string) string { return "not json " + m }, votes.ReasonMalformedJSON},
	{"unknown option", func(m, at string) string { return voteJSON(m, "soak-hot", "zzz", "u", at) }, votes.ReasonUnknownOption},
	{"unknown poll", func(m, at string) string { return voteJSON(m, "no-such-poll", "a", "u", at) }, votes.ReasonUnknownPoll},
	{"wrong type", func(m, at string) string {
		return fmt.Sprintf(`{"voteId":%q,"pollId":"soak-hot","optionId":7,"voterId":"u","castAt":%q}`, m, at)
	}, votes.ReasonWrongType},
	{"castAt in 2099", func(m, _ string) string { return voteJSON(m, "soak-hot", "a", "u", "2099-01-01T00:00:00Z") }, votes.ReasonFutureCastAt},
}

func voteJSON(id, poll, option, voter, castAt string) string {
	return fmt.Sprintf(`{"voteId":%q,"pollId":%q,"optionId":%q,"voterId":%q,"castAt":%q}`, id, poll, option, voter, castAt)
}

// produceVotes sends the sizing's votes a second (steady, or a burst's)
// every tenth of a second, with 5 % sent again (same voteId) and 2 %
// invalid messages; votes a Send could not hand to SQS are sent again
// until they are, after the load too.
func (s *soak) produceVotes(ctx context.Context) {
	producer := votessqs.NewProducer(s.env.Clients.SQS, s.env.Vars["VOTES_QUEUE_URL"])
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var pending []votes.Vote // to send again
	var sent []votes.Vote    // a sample to duplicate from
	seq := 0
	owed := 0.0 // votes due and not yet sent, fractions carried to the next tick
	var last time.Duration
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		// What is due since the last tick, bursts included, so a tick
		// that comes late (a Send held up by the faults) loses no burst.
		into := time.Since(s.loadStart)
		for b := range s.burstStarts() {
			if at := s.burstStart(b); at > last && at <= into {
				s.faults.add("burst", fmt.Sprintf("votes at %.0f/s for %s (%.2f × the store's ceiling)", s.sizing.Burst, s.cfg.BurstFor, s.cfg.BurstShare))
				s.progress("burst %d: votes at %.0f/s for %s", b+1, s.sizing.Burst, s.cfg.BurstFor)
			}
		}
		owed += s.votesDue(last, into)
		last = into
		perTick := int(owed)
		owed -= float64(perTick)
		batch := pending
		pending = nil
		for range perTick {
			if len(sent) > 0 && s.float() < 0.05 {
				batch = append(batch, sent[s.intn(len(sent))])
				s.load.mu.Lock()
				s.load.resent++
				s.load.mu.Unlock()
				continue
			}
			if s.float() < 0.02 {
				s.sendBad(ctx, seq)
				seq++
				continue
			}
			batch = append(batch, s.newVote(seq))
			seq++
		}
		pending = s.send(ctx, producer, batch)
		sent = append(sent, batch...)
		if len(sent) > 5000 {
			sent = sent[len(sent)-5000:]
		}
	}
	// The load is over; the votes still unsent go now (faults are off).
	drain, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(pending) > 0 && drain.Err() == nil {
		pending = s.send(drain, producer, pending)
	}
	if len(pending) > 0 {
		s.progress("WARNING: %d votes could not be sent at all", len(pending))
	}
}

func (s *soak) newVote(seq int) votes.Vote {
	poll := "soak-spread"
	if s.float() < 0.5 {
		poll = "soak-hot"
	}
	options := polls[poll]
	option := options[s.intn(len(options))]
	if poll == "soak-hot" && s.float() < 0.9 {
		option = options[0]
	}
	return votes.Vote{VoteID: fmt.Sprintf("v-%07d", seq), PollID: poll, OptionID: option,
		VoterID: fmt.Sprintf("voter-%d", s.intn(100000)), CastAt: s.clock.Now().Truncate(time.Millisecond)}
}

// send hands a batch to SQS and returns the votes it could not send.
func (s *soak) send(ctx context.Context, p *votessqs.Producer, batch []votes.Vote) []votes.Vote {
	if len(batch) == 0 {
		return nil
	}
	res, err := p.Send(ctx, batch)
	failed := map[int]bool{}
	if err != nil {
		for _, f := range res.Failed {
			failed[f.Index] = true
		}
		if len(res.Failed) == 0 { // nothing sent
			for i := range batch {
				failed[i] = true
			}
		}
	}
	var again []votes.Vote
	s.load.mu.Lock()
	defer s.load.mu.Unlock()
	for i, v := range batch {
		if failed[i] {
			again = append(again, v)
			s.load.retried++
			continue
		}
		s.load.sends++
		s.load.accepted[v.VoteID] = v
	}
	return again
}

// sendBad sends one invalid message, again until SQS takes it.
func (s *soak) sendBad(ctx context.Context, seq int) {
	b := badVotes[seq%len(badVotes)]
	marker := fmt.Sprintf("bad-%07d", seq)
	castAt := s.clock.Now().Truncate(time.Second)
	body := b.body(marker, castAt.Format(time.RFC3339))
	for attempt := 0; attempt < 20; attempt++ {
		_, err := s.env.Clients.SQS.SendMessage(context.WithoutCancel(ctx), &sqs.SendMessageInput{
			QueueUrl: aws.String(s.env.Vars["VOTES_QUEUE_URL"]), MessageBody: aws.String(body)})
		if err == nil {
			s.load.mu.Lock()
			s.load.bad[marker] = badSent{kind: b.kind, castAt: castAt}
			s.load.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.progress("WARNING: bad message %s could not be sent", marker)
}

// The documents: a few sizes, so every placement is written.
var objectSizes = []struct {
	size    int
	random  bool
	inTable bool // ?placement=table: a large one is chunked
}{{2 << 10, true, false}, {64 << 10, false, false}, {300 << 10, true, false}, {300 << 10, true, true}, {1 << 20, true, false}}

const objectKeys = 24

// objectWorker writes, updates (If-Match), reads and deletes documents
// through the HTTP API; every read is checked against the bodies written.
func (s *soak) objectWorker(ctx context.Context, worker int) {
	c, err := objectsclient.NewSigned(s.env.APIURL, s.env.AWS, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		s.progress("objects worker: %v", err)
		return
	}
	known := map[string]int64{} // key → last version seen
	pace := s.pacer()
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("soak/w%d/doc-%02d", worker, s.intn(objectKeys))
		var op string
		switch r := s.float(); {
		case r < 0.45:
			op = s.putObject(ctx, c, key, known, n)
		case r < 0.90:
			op = s.getObject(ctx, c, key, known)
		case r < 0.93:
			op = s.listObjects(ctx, c, worker)
		default:
			op = s.deleteObject(ctx, c, key, known)
		}
		if ctx.Err() != nil && strings.HasSuffix(op, "failed") {
			return // cut by the end of the load
		}
		s.load.mu.Lock()
		s.load.ops[op]++
		sec := int(time.Since(s.load.began) / time.Second)
		for len(s.load.perSec) <= sec {
			s.load.perSec = append(s.load.perSec, 0)
		}
		s.load.perSec[sec]++
		s.load.mu.Unlock()
		pace.wait(ctx)
	}
}

// sharedBodies are the documents the shared workers write under many
// keys (random, so they go to S3 uncompressed): each is stored once, as a
// shared blob, however many keys hold it, while other keys holding it are
// deleted and their references reaped.
var sharedBodies = [][]byte{
	bodies.Random(48<<10, 101), bodies.Random(48<<10, 102), bodies.Random(48<<10, 103),
}

const (
	sharedKeys   = 16
	sharedPrefix = "soak/shared/"
)

// sharedWorker writes the shared bodies under its keys, reads them back
// and deletes keys, through the HTTP API: the reaper and the sweeper free
// blobs that writes of the same bytes take again.
func (s *soak) sharedWorker(ctx context.Context) {
	c, err := objectsclient.NewSigned(s.env.APIURL, s.env.AWS, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		s.progress("shared worker: %v", err)
		return
	}
	known := map[string]int64{}
	pace := s.pacer()
	for ctx.Err() == nil {
		key := fmt.Sprintf("%sk-%02d", sharedPrefix, s.intn(sharedKeys))
		var op string
		switch r := s.float(); {
		case r < 0.5:
			op = s.putShared(ctx, c, key, known)
		case r < 0.7:
			op = s.getObject(ctx, c, key, known)
		default:
			op = s.deleteObject(ctx, c, key, known)
		}
		if ctx.Err() != nil && strings.HasSuffix(op, "failed") {
			return
		}
		s.load.mu.Lock()
		s.load.ops["shared "+op]++
		s.load.mu.Unlock()
		pace.wait(ctx)
	}
}

// pacer spaces one worker's requests: each starts an interval after the
// one before, or at once when that one took longer.
type pacer struct {
	interval time.Duration
	next     time.Time
}

// pacer gives each document worker its share of cfg.ObjectsPerSecond.
func (s *soak) pacer() *pacer {
	workers := float64(s.cfg.ObjectWorkers + s.cfg.SharedWorkers)
	return &pacer{interval: time.Duration(workers / s.cfg.ObjectsPerSecond * float64(time.Second)), next: time.Now()}
}

func (p *pacer) wait(ctx context.Context) {
	p.next = p.next.Add(p.interval)
	if d := time.Until(p.next); d > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
		return
	}
	p.next = time.Now() // behind: no burst to catch up
}

func (s *soak) putShared(ctx context.Context, c *objectsclient.Client, key string, known map[string]int64) string {
	body := sharedBodies[s.intn(len(sharedBodies))]
	sum := sha256.Sum256(body)
	s.load.mu.Lock()
	if s.load.written[key] == nil {
		s.load.written[key] = map[string]bool{}
	}
	s.load.written[key][hex.EncodeToString(sum[:])] = true
	s.load.mu.Unlock()
	m, err := c.Put(ctx, key, body, objectsclient.PutOptions{ContentType: "application/octet-stream"})
	if err != nil {
		delete(known, key)
		return "put failed"
	}
	known[key] = m.Version
	return "put ok"
}

func (s *soak) putObject(ctx context.Context, c *objectsclient.Client, key string, known map[string]int64, n int) string {
	sz := objectSizes[s.intn(len(objectSizes))]
	var body []byte
	if sz.random {
		body = bodies.Random(sz.size, uint64(n)<<8|uint64(s.intn(256)))
	} else {
		body = append(bodies.Text(sz.size-16), fmt.Sprintf("%016d", n)...)
	}
	sum := sha256.Sum256(body)
	s.load.mu.Lock()
	if s.load.written[key] == nil {
		s.load.written[key] = map[string]bool{}
	}
	s.load.written[key][hex.EncodeToString(sum[:])] = true
	s.load.mu.Unlock()
	o := objectsclient.PutOptions{ContentType: "application/octet-stream", KeepInTable: sz.inTable}
	if v, ok := known[key]; ok && v > 0 {
		o.IfMatch = &v
	}
	m, err := c.Put(ctx, key, body, o)
	if cur, conflict := objectsclient.IsConflict(err); conflict {
		known[key] = cur
		return "put conflict (409, If-Match stale)"
	}
	if err != nil {
		delete(known, key)
		return "put failed"
	}
	known[key] = m.Version
	s.load.mu.Lock()
	s.load.placed[m.Kind]++
	s.load.mu.Unlock()
	return "put ok"
}

func (s *soak) getObject(ctx context.Context, c *objectsclient.Client, key string, known map[string]int64) string {
	o, err := c.Get(ctx, key, 0)
	switch {
	case objectsclient.IsNotFound(err):
		delete(known, key)
		return "get 404"
	case err != nil && strings.Contains(err.Error(), "sha256"):
		s.load.mu.Lock()
		s.load.mismatch = append(s.load.mismatch, err.Error())
		s.load.mu.Unlock()
		return "get checksum mismatch"
	case err != nil:
		return "get failed"
	}
	sum := sha256.Sum256(o.Body)
	s.load.mu.Lock()
	ok := s.load.written[key][hex.EncodeToString(sum[:])]
	if !ok {
		s.load.mismatch = append(s.load.mismatch, fmt.Sprintf("%s v%d: %d bytes never written", key, o.Version, len(o.Body)))
	}
	s.load.mu.Unlock()
	known[key] = o.Version
	if !ok {
		return "get unknown content"
	}
	return "get verified"
}

// listObjects lists the worker's prefix, page by page (10 keys a page),
// and checks the answer's shape: keys of the worker's own in key order,
// each once, each with a version and a SHA-256.
func (s *soak) listObjects(ctx context.Context, c *objectsclient.Client, worker int) string {
	prefix := fmt.Sprintf("soak/w%d/", worker)
	var prev string
	for it, err := range c.List(ctx, prefix, objectsclient.ListOptions{PageSize: 10}) {
		if err != nil {
			return "list failed"
		}
		e := it.Entry
		if !strings.HasPrefix(e.Key, prefix+"doc-") || e.Key <= prev || e.Version < 1 || len(e.SHA256) != 64 {
			s.load.mu.Lock()
			s.load.mismatch = append(s.load.mismatch, fmt.Sprintf("listing of %s: %q after %q (version %d, sha256 %q)", prefix, e.Key, prev, e.Version, e.SHA256))
			s.load.mu.Unlock()
			return "list out of order"
		}
		prev = e.Key
	}
	return "list ok"
}

func (s *soak) deleteObject(ctx context.Context, c *objectsclient.Client, key string, known map[string]int64) string {
	_, err := c.Delete(ctx, key, nil)
	switch {
	case err == nil:
		delete(known, key)
		return "delete ok"
	case objectsclient.IsNotFound(err):
		return "delete 404"
	}
	return "delete failed"
}

// loadSummary is the load held.
type loadSummary struct {
	VotesSent, DistinctAccepted, Resent, Retried, Bad int
	VotesPerSecond                                    float64
	ObjectOps                                         map[string]int
	Placements                                        map[string]int
	ObjectsPerSecond                                  float64
	Mismatches                                        []string
	objectsPerSec                                     []int
}

func (l *loadState) summary(d time.Duration) loadSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := loadSummary{VotesSent: l.sends, DistinctAccepted: len(l.accepted), Resent: l.resent, Retried: l.retried, Bad: len(l.bad),
		ObjectOps: map[string]int{}, Placements: map[string]int{}, Mismatches: append([]string(nil), l.mismatch...), objectsPerSec: append([]int(nil), l.perSec...)}
	n := 0
	for k, v := range l.ops {
		s.ObjectOps[k] = v
		n += v
	}
	for k, v := range l.placed {
		s.Placements[k] = v
	}
	s.VotesPerSecond = float64(l.sends+len(l.bad)) / d.Seconds()
	s.ObjectsPerSecond = float64(n) / d.Seconds()
	return s
}
