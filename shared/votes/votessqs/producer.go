package votessqs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// Producer sends votes to the votes queue. It is safe for concurrent use.
type Producer struct {
	client   SendAPI
	queueURL string
	s        settings

	mu      sync.Mutex
	maxSize int // the queue's MaximumMessageSize, once known
}

// NewProducer returns a Producer sending to queueURL through client.
func NewProducer(client SendAPI, queueURL string, opts ...Option) *Producer {
	s := newSettings(opts)
	return &Producer{client: client, queueURL: queueURL, s: s, maxSize: s.maxMessageSize}
}

// QueueURL is the queue the producer sends to.
func (p *Producer) QueueURL() string { return p.queueURL }

// SendResult is what Send did, vote by vote.
type SendResult struct {
	// Sent is the number of votes SQS took.
	Sent int
	// VoteIDs holds each vote's voteId, in the order of the votes: the one
	// given, or the one assigned.
	VoteIDs []string
	// MessageIDs holds the SQS message id of each vote sent, "" for the others.
	MessageIDs []string
	// Failed lists the votes not sent, in the order of the votes.
	Failed []VoteError
}

// VoteError is why one vote of a Send was not sent: a *votes.RejectError
// (the counter would reject it: errors.Is(err, votes.ErrRejected)),
// ErrTooLarge, an *EntryError from SQS, ErrAttemptsExhausted, or the error
// of the call.
type VoteError struct {
	Index  int
	VoteID string
	Err    error
}

func (e *VoteError) Error() string {
	return fmt.Sprintf("vote %d (voteId %q): %v", e.Index, e.VoteID, e.Err)
}

func (e *VoteError) Unwrap() error { return e.Err }

// Send sends votes, filling in a voteId where it is empty and castAt where
// it is zero. Each vote is checked with the counter's own rules
// (votes.Parse of the very body sent) and against the queue's
// MaximumMessageSize; a vote that fails is not sent. The others go in
// batches; failed entries are retried (see the package comment).
//
// The error is nil when every vote was sent. Otherwise it names the first
// vote not sent, and SendResult.Failed lists them all; when reading the
// queue's MaximumMessageSize fails, nothing is sent and Failed is empty.
func (p *Producer) Send(ctx context.Context, vs []votes.Vote) (SendResult, error) {
	res := SendResult{VoteIDs: make([]string, len(vs)), MessageIDs: make([]string, len(vs))}
	if len(vs) == 0 {
		return res, nil
	}
	maxSize, err := p.maxMessageSize(ctx)
	if err != nil {
		return res, err
	}
	now := p.s.now()
	fail := func(i int, err error) {
		res.Failed = append(res.Failed, VoteError{Index: i, VoteID: res.VoteIDs[i], Err: err})
	}
	var msgs []message
	var index []int // vote index of each message
	for i, v := range vs {
		if v.VoteID == "" {
			v.VoteID = p.s.newID()
		}
		if v.CastAt.IsZero() {
			v.CastAt = now
		}
		res.VoteIDs[i] = v.VoteID
		body, err := checkedBody(v, now)
		if err != nil {
			fail(i, err)
			continue
		}
		if limit := min(maxSize, p.s.maxBatchBytes); len(body) > limit {
			fail(i, fmt.Errorf("%w: the vote is %d bytes, the limit is %d", ErrTooLarge, len(body), limit))
			continue
		}
		msgs = append(msgs, message{body: string(body), size: len(body)})
		index = append(index, i)
	}
	var failedLater []VoteError
	for j, o := range p.s.sendAll(ctx, p.client, p.queueURL, msgs) {
		i := index[j]
		if o.err != nil {
			failedLater = append(failedLater, VoteError{Index: i, VoteID: res.VoteIDs[i], Err: o.err})
			continue
		}
		res.Sent++
		res.MessageIDs[i] = o.messageID
	}
	res.Failed = mergeByIndex(res.Failed, failedLater)
	if len(res.Failed) > 0 {
		first := res.Failed[0]
		return res, fmt.Errorf("votessqs: %d of %d votes not sent; first: %w", len(res.Failed), len(vs), &first)
	}
	return res, nil
}

// mergeByIndex merges two lists sorted by Index.
func mergeByIndex(a, b []VoteError) []VoteError {
	if len(b) == 0 {
		return a
	}
	out := make([]VoteError, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].Index < b[0].Index {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// maxMessageSize returns the queue's MaximumMessageSize, read once.
func (p *Producer) maxMessageSize(ctx context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.maxSize > 0 {
		return p.maxSize, nil
	}
	// A throttle, a 5xx or a lost connection is retried as a send is: the
	// read is every Send's first call until it succeeds.
	var out *sqs.GetQueueAttributesOutput
	var err error
	for attempt := 1; ; attempt++ {
		out, err = p.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(p.queueURL),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize},
		})
		if err == nil || !retryable(err) || attempt >= p.s.maxAttempts || retry.Sleep(ctx, p.s.backoff(attempt)) != nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("votessqs: read MaximumMessageSize of %s: %w", p.queueURL, err)
	}
	v := out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)]
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("votessqs: queue %s has MaximumMessageSize %q, want a positive number", p.queueURL, v)
	}
	p.maxSize = n
	return n, nil
}

// EncodeVote returns the message body of a vote, as the Producer sends it:
// the five fields as JSON, castAt in UTC with its fraction of a second,
// '<', '>' and '&' unescaped, and the characters SQS refuses escaped.
func EncodeVote(v votes.Vote) ([]byte, error) {
	v.CastAt = v.CastAt.UTC()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("votessqs: encode vote: %w", err)
	}
	return sqsSafe(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// checkedBody encodes a vote and checks the body with votes.Parse, the
// counter's own rules, so that the producer refuses exactly what the
// counter would reject.
func checkedBody(v votes.Vote, now time.Time) ([]byte, error) {
	// encoding/json would replace invalid UTF-8 with U+FFFD and send
	// another id than the one given: refuse it as the counter would.
	for _, f := range []struct{ name, value string }{
		{"voteId", v.VoteID}, {"pollId", v.PollID}, {"optionId", v.OptionID}, {"voterId", v.VoterID},
	} {
		if !utf8.ValidString(f.value) {
			return nil, &votes.RejectError{Reason: votes.ReasonInvalidUTF8, Detail: f.name + " is not valid UTF-8"}
		}
	}
	body, err := EncodeVote(v)
	if err != nil {
		return nil, err
	}
	if _, err := votes.Parse(body, now); err != nil {
		return nil, err
	}
	return body, nil
}

// NewVoteID returns a random UUIDv4, the default voteId.
func NewVoteID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
