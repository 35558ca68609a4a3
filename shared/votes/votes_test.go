package votes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
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

// An unknown option's reject names the options there are, at most 20.
func TestUnknownOptionListsTheOptions(t *testing.T) {
	many := Poll{ID: "big", Shards: 1}
	for i := range 25 {
		many.Options = append(many.Options, fmt.Sprintf("o%02d", i))
	}
	for _, tt := range []struct {
		p    Poll
		want string
	}{
		{Poll{ID: "p", Options: []string{"a", "b"}, Shards: 1}, `poll p has no option "zzz"; its options are a, b`},
		{many, "its options are o00, o01, o02, o03, o04, o05, o06, o07, o08, o09, o10, o11, o12, o13, o14, o15, o16, o17, o18, o19 and 5 more"},
	} {
		var re *RejectError
		if err := tt.p.Accepts(Vote{OptionID: "zzz", CastAt: now}); !errors.As(err, &re) || !strings.Contains(re.Detail, tt.want) {
			t.Errorf("got %v, want a detail with %q", err, tt.want)
		}
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

// memStore is an in-memory Store with DynamoDB's conditional-put semantics,
// for the counter's unit tests: a ledger per month that exists, and voter
// claims.
type memStore struct {
	pollSet
	mu     sync.Mutex
	months map[string]bool                 // the ledger tables that exist
	ledger map[[3]string]string            // month, pk, sk → voteId
	claims map[[2]string]string            // poll, voter → voteId
	puts   int                             // PutVote and ClaimVoter calls
	fail   func(e Entry, claim bool) error // an injected failure, or nil
	// inFlight and maxInFlight measure the counter's parallelism.
	inFlight, maxInFlight int
}

var _ Store = (*memStore)(nil)

// newMem is a store whose ledger tables are November and December 2026.
func newMem(polls ...Poll) *memStore {
	return &memStore{pollSet: newPollSet(polls...), months: map[string]bool{"2026-11": true, "2026-12": true},
		ledger: map[[3]string]string{}, claims: map[[2]string]string{}}
}

func (m *memStore) enter(e Entry, claim bool) error {
	m.mu.Lock()
	m.puts++
	m.inFlight++
	m.maxInFlight = max(m.maxInFlight, m.inFlight)
	fail := m.fail
	m.mu.Unlock()
	time.Sleep(100 * time.Microsecond) // let parallel puts overlap
	if fail != nil {
		return fail(e, claim)
	}
	return nil
}

func (m *memStore) PutVote(_ context.Context, e Entry) error {
	err := m.enter(e, false)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight--
	if err != nil {
		return err
	}
	if !m.months[e.Month()] {
		return fmt.Errorf("put %s: %w", e.Month(), ErrNoLedger)
	}
	pk, sk := e.LedgerKey()
	k := [3]string{e.Month(), pk, sk}
	if v, ok := m.ledger[k]; ok {
		return &ExistsError{StoredVoteID: v}
	}
	m.ledger[k] = e.VoteID
	return nil
}

func (m *memStore) ClaimVoter(_ context.Context, e Entry) error {
	err := m.enter(e, true)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight--
	if err != nil {
		return err
	}
	k := [2]string{e.PollID, e.VoterID}
	if v, ok := m.claims[k]; ok {
		return &ExistsError{StoredVoteID: v}
	}
	m.claims[k] = e.VoteID
	return nil
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
	return voteAt(id, poll, option, voter, "2026-11-21T10:00:00Z")
}

func voteAt(id, poll, option, voter, castAt string) []byte {
	return []byte(fmt.Sprintf(`{"voteId":%q,"pollId":%q,"optionId":%q,"voterId":%q,"castAt":%q}`, id, poll, option, voter, castAt))
}

func newCounter(s Store, r RejectStore) *Counter {
	return &Counter{Store: s, Rejects: r, Fence: Fence{Grace: 48 * time.Hour}, Now: func() time.Time { return now }, Backoff: func(int) time.Duration { return 0 }}
}

func TestCountWritesEachVoteOnce(t *testing.T) {
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
	// One put per vote, and a claim for the one-vote-per-voter poll's.
	if res.Puts != 4 || store.puts != 4 || res.Retries != 0 {
		t.Errorf("%d puts (store saw %d), %d retries: want 4 and 0", res.Puts, store.puts, res.Retries)
	}
	want := map[Reason]int{ReasonMalformedJSON: 1, ReasonUnknownPoll: 1, ReasonUnknownOption: 1, ReasonDuplicateVoter: 1}
	if fmt.Sprint(res.Rejected) != fmt.Sprint(want) {
		t.Errorf("rejected %v, want %v", res.Rejected, want)
	}
	if len(rej.got) != 4 {
		t.Errorf("reject store holds %d, want 4", len(rej.got))
	}
	// Redelivery of the whole batch: nothing is written twice, alice's
	// second vote (another voteId) is rejected again.
	res = c.Count(context.Background(), []Message{msg("m1", vote("v1", "p", "a", "u1")), msg("m2", vote("v2", "p", "b", "u2")),
		msg("m7", vote("v7", "one", "a", "alice")), msg("m9", vote("v9", "one", "b", "alice"))})
	if res.Accepted != 0 || res.Duplicates != 3 || res.Rejected[ReasonDuplicateVoter] != 1 || len(res.Failed) != 0 {
		t.Errorf("redelivery: %+v", res)
	}
	if len(store.ledger) != 3 || len(store.claims) != 1 {
		t.Errorf("ledger %v, claims %v: want 3 items and alice's one claim", store.ledger, store.claims)
	}
}

// The fence: a vote whose month stopped taking votes is rejected
// month-closed, whatever its poll; the counter never creates a table, so a
// vote for an open month with no ledger table yet goes back to the queue.
func TestCountFencesMonths(t *testing.T) {
	for _, tt := range []struct {
		name, castAt string
		now          time.Time
		want         string // accepted, rejected reason, or failed
	}{
		{"this month", "2026-11-21T10:00:00Z", now, "accepted"},
		{"1970", "1970-01-01T00:00:00Z", now, string(ReasonMonthClosed)},
		{"year 1", "0001-01-01T00:00:00Z", now, string(ReasonMonthClosed)},
		{"two years back", "2024-11-21T10:00:00Z", now, string(ReasonMonthClosed)},
		{"last month, long after its grace", "2026-10-31T23:59:00Z", now, string(ReasonMonthClosed)},
		{"last month within its grace", "2026-10-31T23:59:00Z", time.Date(2026, 11, 1, 0, 5, 0, 0, time.UTC), "failed"},
		{"next month within the clock skew", "2026-12-01T00:30:00Z", time.Date(2026, 11, 30, 23, 50, 0, 0, time.UTC), "accepted"},
		{"a month with no table yet", "2027-01-01T00:10:00Z", time.Date(2026, 12, 31, 23, 55, 0, 0, time.UTC), "failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
			rej := &memRejects{}
			c := newCounter(store, rej)
			c.Now = func() time.Time { return tt.now }
			res := c.Count(context.Background(), []Message{msg("m1", voteAt("v1", "p", "a", "u1", tt.castAt))})
			got := "accepted"
			switch {
			case len(res.Failed) == 1:
				got = "failed"
			case len(rej.got) == 1:
				got = string(rej.got[0].Reason)
			case res.Accepted != 1:
				got = fmt.Sprintf("%+v", res)
			}
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if len(store.months) != 2 {
				t.Errorf("the counter made ledger tables: %v", store.months)
			}
		})
	}
}

// A one-vote-per-voter poll's voter votes once across months: the claim is
// not in a month's ledger. A crash between the claim and the put leaves the
// claim, and the redelivered vote finds its own claim and is written.
func TestCountOneVotePerVoterAcrossMonthsAndCrashes(t *testing.T) {
	store := newMem(Poll{ID: "one", Options: []string{"a", "b"}, Shards: 1, OneVotePerVoter: true})
	store.months["2026-10"] = true
	c := newCounter(store, &memRejects{})
	c.Now = func() time.Time { return time.Date(2026, 11, 1, 1, 0, 0, 0, time.UTC) }
	c.MaxAttempts = 1
	store.fail = func(e Entry, claim bool) error {
		if !claim {
			return errors.New("connection reset")
		}
		return nil
	}
	res := c.Count(context.Background(), []Message{msg("m1", voteAt("v1", "one", "a", "alice", "2026-10-31T23:00:00Z"))})
	if fmt.Sprint(res.Failed) != "[m1]" || len(store.claims) != 1 || len(store.ledger) != 0 {
		t.Fatalf("crash after the claim: %+v, claims %v, ledger %v", res, store.claims, store.ledger)
	}
	store.fail = nil
	res = c.Count(context.Background(), []Message{msg("m1", voteAt("v1", "one", "a", "alice", "2026-10-31T23:00:00Z")),
		msg("m2", voteAt("v2", "one", "b", "alice", "2026-11-01T00:30:00Z"))})
	if res.Accepted != 1 || res.Rejected[ReasonDuplicateVoter] != 1 || len(res.Failed) != 0 {
		t.Errorf("redelivery and a November vote by the same voter: %+v", res)
	}
	if len(store.ledger) != 1 {
		t.Errorf("ledger %v, want alice's October vote only", store.ledger)
	}
}

// Only the messages not written go back to the queue: a store error on
// some votes fails those after MaxAttempts; the rest are accepted.
func TestCountFailsBackOnlyWhatItDidNotWrite(t *testing.T) {
	store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
	store.fail = func(e Entry, _ bool) error {
		if strings.HasSuffix(e.VoteID, "3") {
			return errors.New("boom")
		}
		return nil
	}
	c := newCounter(store, &memRejects{})
	c.MaxAttempts = 3
	var msgs []Message
	for i := range 20 {
		msgs = append(msgs, msg(fmt.Sprint("m", i), vote(fmt.Sprint("v", i), "p", "a", fmt.Sprint("u", i))))
	}
	msgs = append(msgs, msg("bad", []byte("x")))
	res := c.Count(context.Background(), msgs)
	if fmt.Sprint(res.Failed) != "[m13 m3]" || res.Accepted != 18 || res.Rejected[ReasonMalformedJSON] != 1 {
		t.Errorf("result %+v", res)
	}
	if res.Puts != 18+2*3 || res.Retries != 2*2 {
		t.Errorf("%d puts and %d retries, want 24 and 4 (3 attempts for each failing vote)", res.Puts, res.Retries)
	}
	if res.LastError != "boom" {
		t.Errorf("last error %q, want the store's (boom)", res.LastError)
	}
	if len(res.Late) != 0 {
		t.Errorf("late %v: votes given back for a failure are not late", res.Late)
	}
}

// Throttling is waited out until the invocation's deadline margin, not
// MaxAttempts: given back, a vote would wait out the visibility timeout.
// Without a deadline MaxAttempts still bounds it.
func TestCountWaitsOutThrottlingUntilTheDeadline(t *testing.T) {
	for _, tt := range []struct {
		name     string
		deadline bool
		accepted int
		puts     int
	}{
		{name: "with a deadline", deadline: true, accepted: 1, puts: 21},
		{name: "without one", deadline: false, accepted: 0, puts: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
			store.fail = func(Entry, bool) error {
				if store.puts <= 20 {
					return fmt.Errorf("%w: slow down", ErrThrottled)
				}
				return nil
			}
			c := newCounter(store, &memRejects{})
			c.MaxAttempts, c.Margin = 3, time.Millisecond
			ctx := context.Background()
			if tt.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Minute)
				defer cancel()
			}
			res := c.Count(ctx, []Message{msg("m1", vote("v1", "p", "a", "u1"))})
			if res.Accepted != tt.accepted || store.puts != tt.puts || res.Throttles != min(tt.puts, 20) {
				t.Errorf("accepted %d after %d puts, want %d after %d (%+v)", res.Accepted, store.puts, tt.accepted, tt.puts, res)
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
	c.Parallel = 1 // one put at a time, so the count of puts is exact
	// Each put takes a minute of the wall clock; the invocation has ten.
	// The context's deadline is on the real clock, so the wall clock starts
	// at the real now. The counter's own clock (Now) is a month earlier:
	// the deadline does not follow it.
	start := time.Now().UTC().Truncate(time.Second)
	earlier := start.AddDate(0, -1, 0)
	c.Now = func() time.Time { return earlier }
	c.Wall = func() time.Time {
		store.mu.Lock()
		defer store.mu.Unlock()
		return start.Add(time.Duration(store.puts) * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(10*time.Minute))
	defer cancel()
	var msgs []Message
	for i := 0; i < 200; i++ {
		msgs = append(msgs, msg(fmt.Sprint("m", i), voteAt(fmt.Sprint("v", i), "p", "a", fmt.Sprint("u", i), earlier.Format(time.RFC3339))))
	}
	store.months[ledger.MonthOf(earlier)] = true
	res := c.Count(ctx, msgs)
	if !res.Deadline || res.Accepted != 10 || len(res.Failed) != 190 {
		t.Fatalf("deadline %v, accepted %d, failed %d: want a stop after 10 puts with every other vote returned", res.Deadline, res.Accepted, len(res.Failed))
	}
	if len(store.ledger) != res.Accepted {
		t.Errorf("ledger holds %d, accepted %d", len(store.ledger), res.Accepted)
	}
	// Every vote given back was late, and the writes took the ten minutes
	// of the wall clock: 1 vote a minute is what the store took.
	if !slices.Equal(res.Late, res.Failed) || res.WriteTime != 10*time.Minute {
		t.Errorf("%d of %d given back late, writes took %s; want all, and 10m0s", len(res.Late), len(res.Failed), res.WriteTime)
	}
}

// Puts run in parallel, never more than Parallel at once.
func TestCountBoundsParallelPuts(t *testing.T) {
	for _, parallel := range []int{1, 4, 16} {
		store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1})
		c := newCounter(store, &memRejects{})
		c.Parallel = parallel
		var msgs []Message
		for i := range 100 {
			msgs = append(msgs, msg(fmt.Sprint("m", i), vote(fmt.Sprint("v", i), "p", "a", fmt.Sprint("u", i))))
		}
		if res := c.Count(context.Background(), msgs); res.Accepted != 100 {
			t.Fatalf("parallel %d: %+v", parallel, res)
		}
		if store.maxInFlight > parallel || parallel > 1 && store.maxInFlight < 2 {
			t.Errorf("parallel %d: %d puts in flight at most", parallel, store.maxInFlight)
		}
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

// memRetirements is the rotator's record of retired months, in memory.
type memRetirements struct {
	mu      sync.Mutex
	retired map[string]time.Time
	err     error
}

var _ Retirements = (*memRetirements)(nil)

func (r *memRetirements) Retired(_ context.Context, m string) (time.Time, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return time.Time{}, false, r.err
	}
	at, ok := r.retired[m]
	return at, ok, nil
}

// A vote for a month without a table is rejected month-closed at once when
// the rotator retired that month, whatever the counter's clock says; one for
// a month not created yet is given back.
func TestCountRejectsRetiredMonth(t *testing.T) {
	verified := time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name         string
		retirements  *memRetirements
		wantFailed   int
		wantRejected map[Reason]int
	}{
		{"retired", &memRetirements{retired: map[string]time.Time{"2026-11": verified}}, 0, map[Reason]int{ReasonMonthClosed: 2}},
		{"not created yet", &memRetirements{}, 2, map[Reason]int{}},
		{"retirement unreadable", &memRetirements{err: errors.New("archive unavailable")}, 2, map[Reason]int{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := newMem(Poll{ID: "p", Options: []string{"a"}, Shards: 1}, Poll{ID: "one", Options: []string{"a"}, Shards: 1, OneVotePerVoter: true})
			delete(store.months, "2026-11") // the clock says November is open; its table is gone
			rej := &memRejects{}
			counter := newCounter(store, rej)
			counter.Retirements = c.retirements
			res := counter.Count(context.Background(), []Message{
				msg("m1", vote("v1", "p", "a", "u1")),
				msg("m2", vote("v2", "one", "a", "u2")),
			})
			if len(res.Failed) != c.wantFailed || fmt.Sprint(res.Rejected) != fmt.Sprint(c.wantRejected) {
				t.Fatalf("failed %v, rejected %v: want %d failed, rejected %v", res.Failed, res.Rejected, c.wantFailed, c.wantRejected)
			}
			if c.wantRejected[ReasonMonthClosed] > 0 {
				if got := rej.got[0].Detail; !strings.Contains(got, "2026-11, which was retired") || !strings.Contains(got, "2026-12-03T01:00:00Z") {
					t.Errorf("detail %q: want the month and when it was retired", got)
				}
				// The month reopened (a local rehearsal's way back): its votes count again.
				store.months["2026-11"] = true
				delete(c.retirements.retired, "2026-11")
				if res := counter.Count(context.Background(), []Message{msg("m3", vote("v3", "p", "a", "u3"))}); res.Accepted != 1 {
					t.Errorf("after the month reopened: %+v, want the vote accepted", res)
				}
			}
		})
	}
}
