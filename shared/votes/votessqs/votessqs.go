// Package votessqs is the SQS adapter of the votes flow: the Producer that
// sends votes to the votes queue, Rejects, the votes.RejectStore that keeps
// the messages the counter will never count on the rejects queue, and what
// an operator runs on the queues (Depth, Peek, Inspect, Redrive), which the
// CLI, the soak and the bench share. (The load generator that drives the
// Producer is shared/votes/votesload.)
//
// Both send with SendMessageBatch: at most 10 entries and MaxBatchBytes per
// call, and only the entries SQS reports as failed through no fault of the
// sender are sent again, with exponential backoff and jitter, a bounded
// number of times. Entries SQS refuses as the sender's fault are errors.
package votessqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// SQS limits.
const (
	// MaxBatchEntries is the most entries one SendMessageBatch takes.
	MaxBatchEntries = 10
	// MaxBatchBytes is the default bound on the sum of a batch's message
	// sizes: the classic SQS limit of 256 KiB, which every queue accepts.
	MaxBatchBytes = 256 << 10
)

// BatchSendAPI is what Rejects needs from SQS. *sqs.Client satisfies it.
type BatchSendAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SendAPI is what the Producer needs from SQS: sending, and reading the
// queue's MaximumMessageSize once. *sqs.Client satisfies it.
type SendAPI interface {
	BatchSendAPI
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ SendAPI = (*sqs.Client)(nil)

// Errors returned by the package.
var (
	// ErrTooLarge is a message larger than the queue's MaximumMessageSize
	// (or, for a batch of one, than the batch limit). It was not sent.
	ErrTooLarge = errors.New("votessqs: message too large for the queue")
	// ErrAttemptsExhausted is a message SQS kept failing (server-side, or
	// throttled) through every attempt. It was not sent.
	ErrAttemptsExhausted = errors.New("votessqs: attempts exhausted")
)

// EntryError is SQS's answer for one batch entry it did not take.
// SenderFault entries are never retried: the same request would fail again.
type EntryError struct {
	Code        string
	Message     string
	SenderFault bool
}

func (e *EntryError) Error() string {
	who := "server"
	if e.SenderFault {
		who = "sender"
	}
	return fmt.Sprintf("votessqs: entry refused by SQS (%s, %s fault): %s", e.Code, who, e.Message)
}

// Option configures a Producer or Rejects.
type Option func(*settings)

// WithClock sets the clock used for castAt defaults, validation and
// rejectedAt (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *settings) { s.now = now } }

// WithIDs sets the voteId generator used for votes without one (default: a
// random UUIDv4). The ids it returns must satisfy votes.ValidID.
func WithIDs(newID func() string) Option { return func(s *settings) { s.newID = newID } }

// WithMaxAttempts bounds the SendMessageBatch calls one entry takes part in
// (default 6).
func WithMaxAttempts(n int) Option { return func(s *settings) { s.maxAttempts = n } }

// WithBackoff sets the pause before retry n = 1, 2, ... (default: 50 ms
// doubling to 2 s, with jitter).
func WithBackoff(f func(attempt int) time.Duration) Option {
	return func(s *settings) { s.backoff = f }
}

// WithMaxMessageSize gives the queue's MaximumMessageSize, so the Producer
// does not read it with GetQueueAttributes (for producers allowed only
// sqs:SendMessage).
func WithMaxMessageSize(n int) Option { return func(s *settings) { s.maxMessageSize = n } }

// WithMaxBatchBytes bounds the sum of the message sizes of one batch
// (default MaxBatchBytes).
func WithMaxBatchBytes(n int) Option { return func(s *settings) { s.maxBatchBytes = n } }

type settings struct {
	now            func() time.Time
	newID          func() string
	maxAttempts    int
	backoff        func(attempt int) time.Duration
	maxMessageSize int
	maxBatchBytes  int
}

func newSettings(opts []Option) settings {
	s := settings{}
	for _, o := range opts {
		o(&s)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = NewVoteID
	}
	if s.maxAttempts <= 0 {
		s.maxAttempts = 6
	}
	if s.backoff == nil {
		s.backoff = defaultBackoff.Delay
	}
	if s.maxBatchBytes <= 0 {
		s.maxBatchBytes = MaxBatchBytes
	}
	return s
}

// defaultBackoff is the pause before a retry: 50 ms doubling to 2 s.
var defaultBackoff = retry.Backoff{Base: 50 * time.Millisecond, Max: 2 * time.Second}

// retryable reports whether a failed call is worth making again: throttles,
// 5xx answers and connection errors, as the SDK's own retryer classifies them.
func retryable(err error) bool {
	return sdkretry.IsErrorRetryables(sdkretry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}

// outcome is what became of one entry: its SQS message id, or why it was
// not sent.
type outcome struct {
	messageID string
	err       error
}

// deliver sends one batch (at most MaxBatchEntries entries with distinct
// ids) and retries the entries that failed through no fault of the sender,
// and the whole call when it was throttled or failed server-side. The
// outcomes are in the order of entries.
func (s *settings) deliver(ctx context.Context, client BatchSendAPI, queueURL string, entries []types.SendMessageBatchRequestEntry) []outcome {
	out := make([]outcome, len(entries))
	index := make(map[string]int, len(entries))
	for i, e := range entries {
		index[aws.ToString(e.Id)] = i
	}
	last := make([]error, len(entries)) // each pending entry's latest failure
	pending := entries
	for attempt := 1; ; attempt++ {
		resp, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: pending})
		var again []types.SendMessageBatchRequestEntry
		if err != nil {
			err = fmt.Errorf("votessqs: send message batch: %w", err)
			if !retryable(err) || ctx.Err() != nil {
				for _, e := range pending {
					out[index[aws.ToString(e.Id)]].err = err
				}
				return out
			}
			for _, e := range pending {
				last[index[aws.ToString(e.Id)]] = err
			}
			again = pending
		} else {
			answered := make(map[string]bool, len(pending))
			for _, ok := range resp.Successful {
				id := aws.ToString(ok.Id)
				if i, found := index[id]; found {
					answered[id] = true
					out[i] = outcome{messageID: aws.ToString(ok.MessageId)}
				}
			}
			for _, f := range resp.Failed {
				id := aws.ToString(f.Id)
				i, found := index[id]
				if !found {
					continue
				}
				answered[id] = true
				e := &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
				if f.SenderFault {
					out[i].err = e
					continue
				}
				last[i] = e
				again = append(again, entries[i])
			}
			for _, e := range pending {
				if id := aws.ToString(e.Id); !answered[id] {
					last[index[id]] = fmt.Errorf("votessqs: SQS answered nothing for batch entry %s", id)
					again = append(again, e)
				}
			}
		}
		if len(again) == 0 {
			return out
		}
		if attempt >= s.maxAttempts {
			for _, e := range again {
				i := index[aws.ToString(e.Id)]
				out[i].err = fmt.Errorf("%w after %d attempts: %w", ErrAttemptsExhausted, attempt, last[i])
			}
			return out
		}
		if err := retry.Sleep(ctx, s.backoff(attempt)); err != nil {
			for _, e := range again {
				i := index[aws.ToString(e.Id)]
				out[i].err = fmt.Errorf("votessqs: stopped retrying: %w (last failure: %w)", err, last[i])
			}
			return out
		}
		pending = again
	}
}

// message is one body to send, with its size as SQS counts it.
type message struct {
	body  string
	attrs map[string]types.MessageAttributeValue
	size  int
}

// sendAll sends msgs in batches of at most MaxBatchEntries entries and
// maxBatchBytes bytes, one batch at a time, and returns their outcomes in
// order. Entry ids are the messages' indexes.
func (s *settings) sendAll(ctx context.Context, client BatchSendAPI, queueURL string, msgs []message) []outcome {
	out := make([]outcome, len(msgs))
	for _, batch := range batches(msgs, s.maxBatchBytes) {
		entries := make([]types.SendMessageBatchRequestEntry, len(batch))
		for j, i := range batch {
			entries[j] = types.SendMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(msgs[i].body), MessageAttributes: msgs[i].attrs,
			}
		}
		for j, o := range s.deliver(ctx, client, queueURL, entries) {
			out[batch[j]] = o
		}
	}
	return out
}

// batches groups message indexes, in order, into batches of at most
// MaxBatchEntries messages whose sizes sum to at most maxBytes.
func batches(msgs []message, maxBytes int) [][]int {
	var all [][]int
	var cur []int
	bytes := 0
	for i, m := range msgs {
		if len(cur) == MaxBatchEntries || len(cur) > 0 && bytes+m.size > maxBytes {
			all = append(all, cur)
			cur, bytes = nil, 0
		}
		cur = append(cur, i)
		bytes += m.size
	}
	if len(cur) > 0 {
		all = append(all, cur)
	}
	return all
}

// messageSize is a message's size as SQS counts it against
// MaximumMessageSize: the body, and each attribute's name, type and value.
func messageSize(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for name, a := range attrs {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
	}
	return n
}

// sqsSafe rewrites the characters SQS refuses in a message body, or that
// some SQS servers refuse, as JSON \u escapes, so a JSON document keeps its
// meaning and can always be sent. SQS allows #x9 #xA #xD #x20-#xD7FF
// #xE000-#xFFFD #x10000-#x10FFFF; encoding/json already escapes the control
// characters, which leaves U+FFFE, U+FFFF and, for servers that check
// UTF-16 code units (fauxqs), every character beyond U+FFFF.
func sqsSafe(b []byte) []byte {
	i := 0
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if r >= 0xFFFE {
			break
		}
		i += n
	}
	if i == len(b) {
		return b
	}
	out := append(make([]byte, 0, len(b)+16), b[:i]...)
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		i += n
		switch {
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		case r >= 0xFFFE:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[i-n:i]...)
		}
	}
	return out
}
