package votes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func body(fields map[string]any) []byte {
	var parts []string
	for k, v := range fields {
		switch x := v.(type) {
		case string:
			parts = append(parts, fmt.Sprintf("%q:%q", k, x))
		default:
			parts = append(parts, fmt.Sprintf("%q:%v", k, x))
		}
	}
	return []byte("{" + strings.Join(parts, ",") + "}")
}

func good() map[string]any {
	return map[string]any{"voteId": "v1", "pollId": "p", "optionId": "a", "voterId": "u1", "castAt": "2026-11-21T10:00:00Z"}
}

func with(k string, v any) []byte {
	f := good()
	if v == nil {
		delete(f, k)
	} else {
		f[k] = v
	}
	return body(f)
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		want Reason // "" = valid
	}{
		{"valid", body(good()), ""},
		{"unknown fields ignored", []byte(`{"voteId":"v","pollId":"p","optionId":"a","voterId":"u","castAt":"2026-11-21T10:00:00Z","extra":{"x":[1]}}`), ""},
		{"fractional seconds and offset", with("castAt", "2026-11-21T11:00:00.123+01:00"), ""},
		{"not JSON", []byte("hello"), ReasonMalformedJSON},
		{"JSON array", []byte(`[1,2]`), ReasonMalformedJSON},
		{"trailing data", append(body(good()), []byte(` {}`)...), ReasonMalformedJSON},
		{"empty body", []byte(""), ReasonMalformedJSON},
		{"missing voteId", with("voteId", nil), ReasonMissingField},
		{"null pollId", with("pollId", "null-placeholder"), ""},
		{"wrong type optionId", with("optionId", 7), ReasonWrongType},
		{"wrong type castAt", with("castAt", 1763719200), ReasonWrongType},
		{"empty voterId", with("voterId", ""), ReasonEmptyID},
		{"129-char voteId", with("voteId", strings.Repeat("x", 129)), ReasonIDTooLong},
		{"128-char voteId", with("voteId", strings.Repeat("x", 128)), ""},
		{"hash in pollId", with("pollId", "a#b"), ReasonBadID},
		{"control char in voterId", []byte(`{"voteId":"v","pollId":"p","optionId":"a","voterId":"a\u0000b","castAt":"2026-11-21T10:00:00Z"}`), ReasonBadID},
		{"castAt not a time", with("castAt", "yesterday"), ReasonBadCastAt},
		{"castAt far in the future", with("castAt", "2030-01-01T00:00:00Z"), ReasonFutureCastAt},
		{"castAt year -1 in UTC", with("castAt", "0000-01-01T00:00:00+01:00"), ReasonBadCastAt},
		{"invalid UTF-8", append([]byte(`{"voteId":"`), 0xff, 0xfe, '"', '}'), ReasonInvalidUTF8},
		{"1 MiB body", []byte(`{"voteId":"` + strings.Repeat("x", 1<<20) + `"}`), ReasonTooLarge},
		{"deeply nested", []byte(strings.Repeat("[", 10000)), ReasonMalformedJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.body
			if tt.name == "null pollId" {
				b = []byte(strings.Replace(string(body(good())), `"pollId":"p"`, `"pollId":null`, 1))
				tt.want = ReasonMissingField
			}
			v, err := Parse(b, now)
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tt.want)
			}
			if tt.want == "" && (v.VoteID == "" || v.CastAt.IsZero() || v.CastAt.Location() != time.UTC) {
				t.Errorf("parsed %+v", v)
			}
			if tt.want != "" && !errors.Is(err, ErrRejected) {
				t.Errorf("%v is not ErrRejected", err)
			}
		})
	}
}

func TestPollAccepts(t *testing.T) {
	p := Poll{ID: "p", Options: []string{"a", "b"}, Shards: 2, Opens: now.Add(-time.Hour), Closes: now.Add(time.Hour)}
	tests := []struct {
		name   string
		option string
		at     time.Time
		want   Reason
	}{
		{"inside", "a", now, ""},
		{"unknown option", "c", now, ReasonUnknownOption},
		{"before opening", "a", now.Add(-2 * time.Hour), ReasonPollNotOpen},
		{"at closing", "a", now.Add(time.Hour), ReasonPollClosed},
		{"after closing", "b", now.Add(3 * time.Hour), ReasonPollClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Accepts(Vote{OptionID: tt.option, CastAt: tt.at})
			if got := ReasonOf(err); got != tt.want {
				t.Errorf("got %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestPollValidate(t *testing.T) {
	ok := Poll{ID: "p", Options: []string{"a"}, Shards: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Poll{
		{ID: "", Options: []string{"a"}, Shards: 1},
		{ID: "p", Shards: 1},
		{ID: "p", Options: []string{"a", "a"}, Shards: 1},
		{ID: "p", Options: []string{"a#"}, Shards: 1},
		{ID: "p", Options: []string{"a"}, Shards: 0},
		{ID: "p", Options: []string{"a"}, Shards: MaxShards + 1},
		{ID: "p", Options: []string{"a"}, Shards: 1, Opens: now, Closes: now},
	}
	for i, p := range bad {
		if err := p.Validate(); err == nil {
			t.Errorf("poll %d %+v validated", i, p)
		}
	}
}

func entries(n, options int) []Entry {
	var out []Entry
	for i := 0; i < n; i++ {
		out = append(out, Entry{Vote: Vote{VoteID: fmt.Sprint("v", i), PollID: "p", OptionID: fmt.Sprint("o", i%options), VoterID: fmt.Sprint("u", i), CastAt: now}, MessageID: fmt.Sprint("m", i)})
	}
	return out
}

func TestPlanRespectsTransactionLimit(t *testing.T) {
	for _, tc := range []struct{ votes, options, months int }{{1, 1, 1}, {99, 1, 1}, {100, 1, 1}, {1000, 10, 1}, {1000, 1, 1}, {250, 100, 1}, {3, 3, 1},
		{98, 1, 1}, {97, 1, 2}, {1000, 10, 12}, {250, 90, 3}} {
		t.Run(fmt.Sprintf("%d votes %d options %d months", tc.votes, tc.options, tc.months), func(t *testing.T) {
			es := entries(tc.votes, tc.options)
			for i := range es {
				es[i].CastAt = time.Date(2026, time.Month(1+i%tc.months), 15, 0, 0, 0, 0, time.UTC)
			}
			groups := Plan(es, map[string]int{"p": 8}, func(n int) int { return n - 1 })
			total, counted := 0, int64(0)
			for _, g := range groups {
				// Puts, increments and the check that its one month is open.
				if g.Actions() > MaxTransactionActions || g.Actions() != len(g.Entries)+len(g.Increments)+1 || len(g.Months()) != 1 {
					t.Errorf("group of %d actions (%d entries, %d increments, months %v)", g.Actions(), len(g.Entries), len(g.Increments), g.Months())
				}
				total += len(g.Entries)
				perOption := map[string]int64{}
				for _, e := range g.Entries {
					perOption[e.OptionID]++
				}
				for _, inc := range g.Increments {
					counted += inc.N
					if inc.Shard != 7 {
						t.Errorf("increment on shard %d, want the picker's 7", inc.Shard)
					}
					if perOption[inc.OptionID] != inc.N {
						t.Errorf("increment %+v does not match the group's %d votes for it", inc, perOption[inc.OptionID])
					}
				}
			}
			if total != tc.votes || counted != int64(tc.votes) {
				t.Errorf("planned %d entries counting %d, want %d", total, counted, tc.votes)
			}
			// Coalescing: with batch 1000 and 10 options, ≤ 20 write requests.
			if tc.votes <= 98 && tc.months == 1 && len(groups) != 1 {
				t.Errorf("%d votes for one option in one month in %d transactions, want 1 (98 puts, an update, a check)", tc.votes, len(groups))
			}
			if tc.votes == 1000 && tc.options == 10 && tc.months == 1 && len(groups) > 20 {
				t.Errorf("%d transactions for 1000 votes over 10 options, want ≤ 20", len(groups))
			}
		})
	}
}

func TestLedgerKey(t *testing.T) {
	e := Entry{Vote: Vote{VoteID: "v", PollID: "p", VoterID: "alice"}}
	pk, sk := e.LedgerKey()
	if !strings.HasPrefix(pk, "p#") || sk != "alice#v" {
		t.Errorf("got %s / %s", pk, sk)
	}
	e.OneVotePerVoter = true
	if _, sk := e.LedgerKey(); sk != "alice" {
		t.Errorf("one vote per voter: sk %s, want alice", sk)
	}
	spread := map[int]int{}
	for i := 0; i < 16000; i++ {
		spread[LedgerSuffix(fmt.Sprint("voter-", i))]++
	}
	for s := 0; s < LedgerSuffixes; s++ {
		if spread[s] < 800 || spread[s] > 1200 {
			t.Errorf("suffix %d holds %d of 16000 voters, want about 1000", s, spread[s])
		}
	}
}

// memStore is an in-memory Store with real transaction semantics, for the
// counter's unit tests.
type memStore struct {
	mu       sync.Mutex
	polls    pollSet
	ledger   map[[2]string]string // key → voteId
	counts   map[string]int64
	writes   map[string]int // per shard key
	failNext func(g Group) error
	commits  int
	closed   string // a retired month: writes to it fail with *MonthClosedError
}

func (m *memStore) closedErr(es []Entry) error {
	for _, e := range es {
		if e.Month() == m.closed {
			return &MonthClosedError{Month: m.closed}
		}
	}
	return nil
}

func newMem(polls ...Poll) *memStore {
	return &memStore{polls: newPollSet(polls...), ledger: map[[2]string]string{}, counts: map[string]int64{}, writes: map[string]int{}}
}

func (m *memStore) Polls(ctx context.Context, ids []string) (map[string]Poll, error) {
	return m.polls.Polls(ctx, ids)
}

// pollSet is the polls of the in-memory stores, by id.
type pollSet map[string]Poll

func newPollSet(polls ...Poll) pollSet {
	s := pollSet{}
	for _, p := range polls {
		s[p.ID] = p
	}
	return s
}

// Polls returns those of ids that exist.
func (s pollSet) Polls(_ context.Context, ids []string) (map[string]Poll, error) {
	out := map[string]Poll{}
	for _, id := range ids {
		if p, ok := s[id]; ok {
			out[id] = p
		}
	}
	return out, nil
}

func (m *memStore) Commit(ctx context.Context, g Group) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commits++
	if err := m.closedErr(g.Entries); err != nil {
		return err
	}
	if m.failNext != nil {
		if err := m.failNext(g); err != nil {
			return err
		}
	}
	ce := &CancelledError{Existing: map[int]string{}}
	for i, e := range g.Entries {
		pk, sk := e.LedgerKey()
		if v, ok := m.ledger[[2]string{pk, sk}]; ok {
			ce.Existing[i] = v
		}
	}
	if len(ce.Existing) > 0 {
		return ce
	}
	for _, e := range g.Entries {
		pk, sk := e.LedgerKey()
		m.ledger[[2]string{pk, sk}] = e.VoteID
	}
	for _, inc := range g.Increments {
		m.counts[inc.PollID+"/"+inc.OptionID] += inc.N
		m.writes[fmt.Sprint(inc.PollID, "#", inc.Shard)]++
	}
	return nil
}

func (m *memStore) PutEntries(ctx context.Context, es []Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.closedErr(es); err != nil {
		return err
	}
	for _, e := range es {
		pk, sk := e.LedgerKey()
		m.ledger[[2]string{pk, sk}] = e.VoteID
	}
	return nil
}

func (m *memStore) AddCounts(ctx context.Context, incs []Increment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, inc := range incs {
		m.counts[inc.PollID+"/"+inc.OptionID] += inc.N
	}
	return nil
}

type memRejects struct {
	got  []Rejected
	fail bool
}

func (r *memRejects) Reject(ctx context.Context, rs []Rejected) error {
	if r.fail {
		return errors.New("rejects queue unavailable")
	}
	r.got = append(r.got, rs...)
	return nil
}

func msg(id string, b []byte) Message { return Message{ID: id, Body: b} }

func vote(id, poll, option, voter string) []byte {
	return []byte(fmt.Sprintf(`{"voteId":%q,"pollId":%q,"optionId":%q,"voterId":%q,"castAt":"2026-11-21T10:00:00Z"}`, id, poll, option, voter))
}

func newCounter(s Store, r RejectStore) *Counter {
	return &Counter{Store: s, Rejects: r, Now: func() time.Time { return now }, Backoff: func(int) time.Duration { return 0 }}
}

// A vote of a retired month is rejected with its reason, in either mode;
// the batch's other votes are counted.
func TestCountRejectsClosedMonth(t *testing.T) {
	for _, mode := range []Mode{ExactlyOnce, AtLeastOnce} {
		store := newMem(Poll{ID: "p", Options: []string{"a", "b"}, Shards: 2})
		store.closed = "2026-10"
		rej := &memRejects{}
		c := newCounter(store, rej)
		c.Mode = mode
		october := []byte(`{"voteId":"old","pollId":"p","optionId":"a","voterId":"u0","castAt":"2026-10-31T23:59:00Z"}`)
		res := c.Count(context.Background(), []Message{msg("m0", october), msg("m1", vote("v1", "p", "a", "u1")), msg("m2", vote("v2", "p", "b", "u2"))})
		if res.Accepted != 2 || res.Rejected[ReasonMonthClosed] != 1 || len(res.Failed) != 0 {
			t.Errorf("%s: result %+v, want 2 accepted and 1 rejected month-closed", mode, res)
		}
		if len(rej.got) != 1 || rej.got[0].MessageID != "m0" || !strings.Contains(rej.got[0].Detail, "2026-10") {
			t.Errorf("%s: rejects %+v", mode, rej.got)
		}
		if store.counts["p/a"] != 1 || store.counts["p/b"] != 1 {
			t.Errorf("%s: counts %v, want the November votes only", mode, store.counts)
		}
	}
}

func TestCountExactlyOnce(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a", "b"}, Shards: 4}, Poll{ID: "one", Options: []string{"a", "b"}, Shards: 1, OneVotePerVoter: true})
	rej := &memRejects{}
	c := newCounter(store, rej)
	res := c.Count(context.Background(), []Message{
		msg("m1", vote("v1", "p", "a", "u1")),
		msg("m2", vote("v2", "p", "b", "u2")),
		msg("m3", vote("v1", "p", "a", "u1")), // the same vote twice in a batch
		msg("m4", []byte("garbage")),
		msg("m5", vote("v5", "nope", "a", "u5")),
		msg("m6", vote("v6", "p", "z", "u6")),
		msg("m7", vote("v7", "one", "a", "alice")),
		msg("m8", vote("v8", "one", "b", "alice")), // second vote by alice in the same batch
	})
	if res.Accepted != 3 || res.Duplicates != 1 || len(res.Failed) != 0 {
		t.Errorf("result %+v", res)
	}
	want := map[Reason]int{ReasonMalformedJSON: 1, ReasonUnknownPoll: 1, ReasonUnknownOption: 1, ReasonDuplicateVoter: 1}
	if fmt.Sprint(res.Rejected) != fmt.Sprint(want) {
		t.Errorf("rejected %v, want %v", res.Rejected, want)
	}
	if len(rej.got) != 4 {
		t.Errorf("reject store holds %d, want 4", len(rej.got))
	}
	// Redelivery of the whole batch: nothing is counted twice, alice's
	// second vote (another voteId) is rejected again.
	res = c.Count(context.Background(), []Message{msg("m1", vote("v1", "p", "a", "u1")), msg("m2", vote("v2", "p", "b", "u2")), msg("m9", vote("v9", "one", "b", "alice"))})
	if res.Accepted != 0 || res.Duplicates != 2 || res.Rejected[ReasonDuplicateVoter] != 1 {
		t.Errorf("redelivery: %+v", res)
	}
	if store.counts["p/a"] != 1 || store.counts["p/b"] != 1 || store.counts["one/a"] != 1 || store.counts["one/b"] != 0 {
		t.Errorf("counts %v", store.counts)
	}
}

func TestCountRetriesConflictsAndThrottles(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 4})
	fails := 0
	store.failNext = func(g Group) error {
		fails++
		switch fails {
		case 1:
			return &CancelledError{Existing: map[int]string{}, Retryable: true, Cause: errors.New("TransactionConflict")}
		case 2:
			return fmt.Errorf("%w: slow down", ErrThrottled)
		}
		return nil
	}
	c := newCounter(store, &memRejects{})
	var picks []int
	c.Pick = func(n int) int { picks = append(picks, len(picks)%n); return picks[len(picks)-1] }
	res := c.Count(context.Background(), []Message{msg("m1", vote("v1", "p", "a", "u1"))})
	if res.Accepted != 1 || res.TxRetries != 2 || res.Throttles != 1 || len(res.Failed) != 0 {
		t.Errorf("result %+v", res)
	}
	if len(picks) < 3 {
		t.Errorf("shards picked %d times, want a new pick on each retry", len(picks))
	}
}

func TestCountGivesUpAndReportsFailures(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
	store.failNext = func(Group) error { return errors.New("boom") }
	c := newCounter(store, &memRejects{})
	c.MaxAttempts = 3
	res := c.Count(context.Background(), []Message{msg("m1", vote("v1", "p", "a", "u1")), msg("m2", vote("v2", "p", "a", "u2")), msg("bad", []byte("x"))})
	if fmt.Sprint(res.Failed) != "[m1 m2]" || res.Accepted != 0 || res.Rejected[ReasonMalformedJSON] != 1 || store.commits != 3 {
		t.Errorf("result %+v after %d commits", res, store.commits)
	}
}

// Throttling is waited out until the invocation's deadline margin, not
// MaxAttempts: given back, the group would wait out the visibility timeout.
// Without a deadline MaxAttempts still bounds it.
func TestCountWaitsOutThrottlingUntilTheDeadline(t *testing.T) {
	for _, tt := range []struct {
		name     string
		deadline bool
		accepted int
		commits  int
	}{
		{name: "with a deadline", deadline: true, accepted: 1, commits: 21},
		{name: "without one", deadline: false, accepted: 0, commits: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
			store.failNext = func(Group) error {
				if store.commits <= 20 {
					return fmt.Errorf("%w: slow down", ErrThrottled)
				}
				return nil
			}
			c := newCounter(store, &memRejects{})
			c.MaxAttempts, c.Margin = 3, time.Millisecond
			c.Backoff = func(int) time.Duration { return 0 }
			ctx := context.Background()
			if tt.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Minute)
				defer cancel()
			}
			res := c.Count(ctx, []Message{msg("m1", vote("v1", "p", "a", "u1"))})
			if res.Accepted != tt.accepted || store.commits != tt.commits {
				t.Errorf("accepted %d after %d commits, want %d after %d (%+v)", res.Accepted, store.commits, tt.accepted, tt.commits, res)
			}
		})
	}
}

func TestCountKeepsRejectsWhenTheRejectStoreFails(t *testing.T) {
	c := newCounter(newMem(), &memRejects{fail: true})
	res := c.Count(context.Background(), []Message{msg("m1", []byte("not json"))})
	if fmt.Sprint(res.Failed) != "[m1]" || len(res.Rejected) != 0 {
		t.Errorf("a reject the store could not keep must be retried, got %+v", res)
	}
}

func TestCountStopsBeforeTheDeadline(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
	c := newCounter(store, &memRejects{})
	c.Parallel = 1 // one commit at a time, so the count of commits is exact
	// Each commit takes a minute of the counter's clock; the invocation has ten.
	start := time.Now()
	c.Now = func() time.Time {
		store.mu.Lock()
		defer store.mu.Unlock()
		return start.Add(time.Duration(store.commits) * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(10*time.Minute))
	defer cancel()
	var msgs []Message
	for i := 0; i < 2000; i++ {
		msgs = append(msgs, msg(fmt.Sprint("m", i), vote(fmt.Sprint("v", i), "p", "a", fmt.Sprint("u", i))))
	}
	res := c.Count(ctx, msgs)
	if !res.Deadline || res.Accepted == 0 || len(res.Failed) == 0 || res.Accepted+len(res.Failed) != 2000 {
		t.Fatalf("deadline %v, accepted %d, failed %d: want a stop with every vote either counted or returned", res.Deadline, res.Accepted, len(res.Failed))
	}
	if store.commits != 10 {
		t.Errorf("%d commits, want 10 (stop with the margin, 5 s, left)", store.commits)
	}
	if store.counts["p/a"] != int64(res.Accepted) {
		t.Errorf("counted %d, accepted %d", store.counts["p/a"], res.Accepted)
	}
}

func TestCountAtLeastOnceCanOverCount(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 2})
	c := newCounter(store, &memRejects{})
	c.Mode = AtLeastOnce
	batch := []Message{msg("m1", vote("v1", "p", "a", "u1")), msg("m2", vote("v2", "p", "a", "u2"))}
	if res := c.Count(context.Background(), batch); res.Accepted != 2 || res.CounterWrites != 1 {
		t.Errorf("result %+v", res)
	}
	c.Count(context.Background(), batch) // redelivered
	if store.counts["p/a"] != 4 {
		t.Errorf("at-least-once counted %d after a redelivery, want 4 (the documented over-count)", store.counts["p/a"])
	}
}

// Writes spread over the shards: with a random picker no shard takes more
// than about 1.5/N of a poll's increments.
func TestShardSpread(t *testing.T) {
	const shards = 8
	store := newMem(Poll{ID: "p", Options: []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"}, Shards: shards})
	c := newCounter(store, &memRejects{})
	seed := uint64(1)
	c.Pick = func(n int) int { seed = seed*6364136223846793005 + 1442695040888963407; return int(seed>>33) % n }
	for b := 0; b < 40; b++ {
		var msgs []Message
		for i := 0; i < 500; i++ {
			id := fmt.Sprint(b, "-", i)
			msgs = append(msgs, msg(id, vote("v"+id, "p", fmt.Sprint("o", i%10), "u"+id)))
		}
		c.Count(context.Background(), msgs)
	}
	total := 0
	for _, n := range store.writes {
		total += n
	}
	for k, n := range store.writes {
		if share := float64(n) / float64(total); share > 1.5/shards {
			t.Errorf("shard %s took %.3f of %d writes, above 1.5/%d", k, share, total, shards)
		}
	}
	if len(store.writes) != shards {
		t.Errorf("%d shards written, want %d", len(store.writes), shards)
	}
}

func TestDeckPicker(t *testing.T) {
	seed := uint64(3)
	pick := DeckPicker(func(n int) int { seed = seed*6364136223846793005 + 1; return int(seed>>33) % n })
	for round := 0; round < 5; round++ {
		seen := map[int]bool{}
		for i := 0; i < 8; i++ {
			s := pick(8)
			if s < 0 || s >= 8 || seen[s] {
				t.Fatalf("round %d: pick %d repeats or is out of range (%v)", round, s, seen)
			}
			seen[s] = true
		}
	}
	if got := pick(1); got != 0 {
		t.Errorf("pick(1) = %d", got)
	}
}
