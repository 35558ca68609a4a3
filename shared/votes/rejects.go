package votes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// A poll's rejects are the rejected messages that name it: a pollId that
// parses as an id, of a poll that exists. The counter records each once
// (RejectRecorder) beside sending it to the operators' rejects queue, so a
// producer reads them through the poll (ReadRejects, Totals.Rejected)
// without taking anything from that queue. Rejects naming no poll, or a
// poll that does not exist, go only to the rejects queue.

// Limits of a poll's reject records.
const (
	// RejectShards is how many partitions a poll's reject records are
	// spread over, by message id: a flood of bad votes on one poll is not
	// one hot key.
	RejectShards = 4
	// MaxRejectExcerpt is how much of a rejected body its record keeps:
	// enough to recognise the message, never a hostile body whole.
	MaxRejectExcerpt = 512
	// MaxRejectDetail bounds a record's detail (ours, and short).
	MaxRejectDetail = 512
	// DefaultRejectSample and MaxRejectSample bound ReadRejects' sample.
	DefaultRejectSample = 20
	MaxRejectSample     = 100
	// maxNamedBody is the largest body searched for the poll it names:
	// SQS's own message limit.
	maxNamedBody = 1 << 20
)

// RejectRecord is what a poll keeps of one rejected message: who sent it
// when, why it was rejected, and the first bytes of its body.
type RejectRecord struct {
	MessageID string    `json:"messageId"`
	SentAt    time.Time `json:"sentAt"`
	Reason    Reason    `json:"reason"`
	Detail    string    `json:"detail"`
	VoteID    string    `json:"voteId,omitempty"`
	OptionID  string    `json:"optionId,omitempty"`
	// Excerpt is the body's first MaxRejectExcerpt bytes at most, cut at a
	// character boundary; a body that is not UTF-8 has them in
	// ExcerptBase64 instead. BodySize is the whole body's size.
	Excerpt       string `json:"excerpt,omitempty"`
	ExcerptBase64 []byte `json:"excerptBase64,omitempty"`
	BodySize      int    `json:"bodySize"`
}

// Record is what the poll r names keeps of r.
func (r Rejected) Record() RejectRecord {
	rec := RejectRecord{
		MessageID: r.MessageID, SentAt: r.SentAt.UTC(), Reason: r.Reason,
		Detail: strings.ToValidUTF8(cutText([]byte(r.Detail), MaxRejectDetail), "\uFFFD"),
		VoteID: r.VoteID, OptionID: r.OptionID, BodySize: len(r.Body),
	}
	if utf8.Valid(r.Body) {
		rec.Excerpt = cutText(r.Body, MaxRejectExcerpt)
	} else {
		rec.ExcerptBase64 = bytes.Clone(r.Body[:min(len(r.Body), MaxRejectExcerpt)])
	}
	return rec
}

// cutText returns at most n bytes of the UTF-8 text b, not splitting a
// character.
func cutText(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n])
}

// RejectShard is the shard of a poll's reject records a message's record
// goes to.
func RejectShard(messageID string) int {
	h := fnv.New32a()
	h.Write([]byte(messageID))
	return int(h.Sum32() % RejectShards)
}

// named reads the ids a rejected body names, as far as it can be read: each
// of pollId, voteId and optionId that is a JSON string whose raw bytes are
// UTF-8 and that is a valid id ("" otherwise). A body that is not whole
// JSON (malformed-json: cut short, a bad value) still names the fields that
// come before the point where it breaks.
func named(body []byte) (poll, vote, option string) {
	if len(body) > maxNamedBody {
		return "", "", ""
	}
	raw := leadingFields(body)
	id := func(name string) string {
		r, ok := raw[name]
		var s string
		if !ok || !utf8.Valid(r) || json.Unmarshal(r, &s) != nil || ValidID(s) != nil {
			return ""
		}
		return s
	}
	return id("pollId"), id("voteId"), id("optionId")
}

// leadingFields reads the fields of the JSON object body starts with, up to
// the end of the object or the first thing that is not JSON; a repeated
// name keeps its last value, as json.Unmarshal does.
func leadingFields(body []byte) map[string]json.RawMessage {
	raw := map[string]json.RawMessage{}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return raw
	}
	for dec.More() {
		t, err := dec.Token()
		name, ok := t.(string)
		if err != nil || !ok {
			break
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		raw[name] = v
	}
	return raw
}

// RejectRecorder keeps a poll's rejects for its producers.
type RejectRecorder interface {
	// RecordRejects records each reject under its PollID once: one whose
	// MessageID and SentAt were recorded already (a redelivery) changes
	// nothing. An error means some may not be recorded; recording them
	// again is safe.
	RecordRejects(ctx context.Context, rs []Rejected) error
}

// RejectReader reads a poll and its rejects.
type RejectReader interface {
	Poll(ctx context.Context, id string) (Poll, error) // ErrNoPoll when missing
	// RejectCounts sums the poll's rejects by reason over its reject shards.
	RejectCounts(ctx context.Context, pollID string) (map[Reason]int64, error)
	// RecentRejects returns the poll's latest reject records by SentAt,
	// newest first, at most limit.
	RecentRejects(ctx context.Context, pollID string, limit int) ([]RejectRecord, error)
}

// PollRejects is what ReadRejects answers: a poll's rejects by reason and
// a sample of the latest.
type PollRejects struct {
	PollID   string           `json:"pollId"`
	Rejected map[Reason]int64 `json:"rejected"`
	Recent   []RejectRecord   `json:"recent"`
}

// ErrBadLimit is a sample size outside 1 to MaxRejectSample.
var ErrBadLimit = fmt.Errorf("votes: the sample's limit must be 1 to %d", MaxRejectSample)

// ReadRejects reads a poll's reject counts and its latest limit records,
// in parallel; ErrNoPoll for a poll that does not exist, ErrBadLimit for a
// limit outside 1 to MaxRejectSample.
func ReadRejects(ctx context.Context, r RejectReader, pollID string, limit int) (PollRejects, error) {
	if limit < 1 || limit > MaxRejectSample {
		return PollRejects{}, ErrBadLimit
	}
	if ValidID(pollID) != nil {
		return PollRejects{}, fmt.Errorf("%w: %q", ErrNoPoll, pollID)
	}
	p, err := r.Poll(ctx, pollID)
	if err != nil {
		return PollRejects{}, err
	}
	out := PollRejects{PollID: p.ID, Recent: []RejectRecord{}}
	var countErr, recentErr error
	var wg sync.WaitGroup
	wg.Go(func() { out.Rejected, countErr = r.RejectCounts(ctx, p.ID) })
	wg.Go(func() {
		var recent []RejectRecord
		if recent, recentErr = r.RecentRejects(ctx, p.ID, limit); len(recent) > 0 {
			out.Recent = recent
		}
	})
	wg.Wait()
	if err := errors.Join(countErr, recentErr); err != nil {
		return PollRejects{}, fmt.Errorf("votes: rejects of %s: %w", p.ID, err)
	}
	return out, nil
}
