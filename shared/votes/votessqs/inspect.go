package votessqs

// What an operator reads of the votes flow's queues without consuming
// them: a queue's depth, its messages (peeked: received with a hold, then
// made visible again) and summaries of the dead-letter and rejects queues
// by reason. The CLI, the soak and the bench call these.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// DepthAPI is what Depth needs from SQS; *sqs.Client satisfies it.
type DepthAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// ReceiveAPI receives messages; *sqs.Client satisfies it.
type ReceiveAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
}

// PeekAPI is what Peek needs from SQS; *sqs.Client satisfies it.
type PeekAPI interface {
	ReceiveAPI
	VisibilityAPI
	DepthAPI
}

// InspectAPI is what Inspect needs from SQS; *sqs.Client satisfies it.
type InspectAPI interface {
	PeekAPI
}

var _ InspectAPI = (*sqs.Client)(nil)

// MaxHold is the longest a peeked message can stay hidden (SQS's limit
// on a visibility timeout).
const MaxHold = 12 * time.Hour

// Depth is a queue's approximate number of messages waiting (visible) and
// received but not yet deleted (in flight).
func Depth(ctx context.Context, c DepthAPI, url string) (visible, inFlight int, err error) {
	names := []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: names})
	if err != nil {
		return 0, 0, fmt.Errorf("votessqs: depth of %s: %w", url, err)
	}
	var n [2]int
	for i, name := range names {
		v, ok := out.Attributes[string(name)]
		if n[i], err = strconv.Atoi(v); !ok || err != nil || n[i] < 0 {
			return 0, 0, fmt.Errorf("votessqs: depth of %s: attribute %s is %q", url, name, v)
		}
	}
	return n[0], n[1], nil
}

// holdSeconds is hold as a visibility timeout, refused outside 1 s..MaxHold.
func holdSeconds(hold time.Duration) (int32, error) {
	if hold < time.Second || hold > MaxHold {
		return 0, fmt.Errorf("votessqs: hold %s outside 1s..%s", hold, MaxHold)
	}
	return int32(hold.Round(time.Second) / time.Second), nil
}

// emptyAnswers is how many empty receives in a row Peek takes before it
// believes a queue that its depth says holds more: SQS may answer a
// receive with nothing while messages wait (a short poll samples some of
// its servers; the local server did so once under load).
const emptyAnswers = 3

// Peek reads up to max messages (0: all) without consuming them: each is
// received with its attributes, hidden for hold, and made visible again
// before Peek returns, whatever happened. A message seen twice (its hold
// ran out while reading a long queue) is kept once. An empty answer ends
// the read once the queue's depth, read first, is reached, or after
// emptyAnswers of them in a row.
func Peek(ctx context.Context, c PeekAPI, url string, max int, hold time.Duration) ([]types.Message, error) {
	secs, err := holdSeconds(hold)
	if err != nil {
		return nil, err
	}
	visible, _, err := Depth(ctx, c, url)
	if err != nil {
		return nil, err
	}
	return peek(ctx, c, url, max, secs, visible)
}

// peek is Peek on a queue of visible messages, held for secs.
func peek(ctx context.Context, c PeekAPI, url string, max int, secs int32, visible int) ([]types.Message, error) {
	var err error
	var msgs []types.Message
	seen := map[string]bool{}
	var handles []string
	empties := 0
	for max == 0 || len(msgs) < max {
		n := int32(MaxBatchEntries)
		if max > 0 {
			n = int32(min(MaxBatchEntries, max-len(msgs)))
		}
		var out *sqs.ReceiveMessageOutput
		out, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: n, VisibilityTimeout: secs, WaitTimeSeconds: 1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			err = fmt.Errorf("votessqs: receive from %s: %w", url, err)
			break
		}
		fresh := 0
		for _, m := range out.Messages {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			if id := aws.ToString(m.MessageId); !seen[id] {
				seen[id] = true
				msgs = append(msgs, m)
				fresh++
			}
		}
		if len(out.Messages) == 0 && len(msgs) < visible && empties+1 < emptyAnswers {
			empties++
			continue // an empty answer from a queue that holds more
		}
		if fresh == 0 {
			break // an empty queue, or only messages read already: the queue went round
		}
		empties = 0
	}
	return msgs, errors.Join(err, Release(context.WithoutCancel(ctx), c, url, handles))
}

// Release makes received messages visible again at once, ten at a time.
// A message it could not release reappears when its hold ends.
func Release(ctx context.Context, c VisibilityAPI, url string, handles []string) error {
	var errs []error
	for start := 0; start < len(handles); start += MaxBatchEntries {
		batch := handles[start:min(start+MaxBatchEntries, len(handles))]
		in := &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url)}
		for i, h := range batch {
			in.Entries = append(in.Entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h), VisibilityTimeout: 0})
		}
		out, err := c.ChangeMessageVisibilityBatch(ctx, in)
		if err != nil {
			errs = append(errs, fmt.Errorf("release messages on %s: %w", url, err))
			continue
		}
		for _, f := range out.Failed {
			errs = append(errs, fmt.Errorf("release a message on %s: %s %s", url, aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("votessqs: %d release errors (those messages reappear when their hold ends); first: %w", len(errs), errs[0])
	}
	return nil
}

// Kind names the queue a Summary is of: how its messages' reasons are read.
type Kind string

// The kinds of queue Inspect summarises.
const (
	DeadLetters Kind = "dlq"     // the votes dead-letter queue: reasons are DeadLetterReason's
	RejectsKind Kind = "rejects" // the rejects queue: reasons are RejectReason's
)

// Countable is the DeadLetterReason of a vote the counter would count: it
// failed for another reason, and redriving it helps.
const Countable = "countable"

// Sample is a message as a Summary shows it.
type Sample struct {
	MessageID string    `json:"messageId"`
	Sent      time.Time `json:"sent,omitzero"`
	Receives  int       `json:"receiveCount,omitempty"`
	Reason    string    `json:"reason"`
	Detail    string    `json:"detail,omitempty"`
	Bytes     int       `json:"bytes"`
	Body      string    `json:"body"` // the start of the body, printable
}

// Summary is a queue's messages counted by reason, with the first samples.
type Summary struct {
	Queue       string         `json:"queue"`
	Kind        Kind           `json:"kind"`
	Approximate int            `json:"approximateMessages"` // visible when read (Depth)
	Read        int            `json:"read"`
	ByReason    map[string]int `json:"byReason"`
	Oldest      time.Time      `json:"oldest,omitzero"`
	Newest      time.Time      `json:"newest,omitzero"`
	Samples     []Sample       `json:"samples"`
}

// Printable is the start of s, valid UTF-8 and printable: at most 160
// characters, control characters escaped.
func Printable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) > 160 {
		s = string([]rune(s)[:160]) + "…"
	}
	var out strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) {
			out.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		out.WriteString(q[1 : len(q)-1])
	}
	return out.String()
}

// SentAt is when SQS took m (zero when m lacks the attribute).
func SentAt(m types.Message) time.Time {
	ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// DeadLetterReason classifies a dead letter: Countable, a vote the counter
// would count, or "invalid: <reason>", one it would reject (then it should
// not be on the dead-letter queue at all).
func DeadLetterReason(body string, now time.Time) (reason, detail string) {
	v, err := votes.Parse([]byte(body), now)
	if err != nil {
		r := votes.ReasonOf(err)
		if r == "" {
			r = "unreadable"
		}
		return "invalid: " + string(r), err.Error()
	}
	return Countable, "poll " + v.PollID
}

// RejectReason is a reject's reason: its ReasonAttribute, else its body's.
func RejectReason(m types.Message) (reason, detail string) {
	var rm RejectMessage
	jerr := json.Unmarshal([]byte(aws.ToString(m.Body)), &rm)
	if a, ok := m.MessageAttributes[ReasonAttribute]; ok && aws.ToString(a.StringValue) != "" {
		return aws.ToString(a.StringValue), rm.Detail
	}
	if jerr == nil && rm.Reason != "" {
		return string(rm.Reason), rm.Detail
	}
	return "unknown (no reason attribute, body not a reject)", ""
}

// Summarise counts msgs of a queue of kind by reason, the oldest and newest
// sent, and keeps the first samples. Approximate is left to the caller.
func Summarise(kind Kind, url string, msgs []types.Message, samples int, now time.Time) Summary {
	s := Summary{Queue: url, Kind: kind, Read: len(msgs), ByReason: map[string]int{}, Samples: []Sample{}}
	for _, m := range msgs {
		body := aws.ToString(m.Body)
		var reason, detail string
		if kind == RejectsKind {
			reason, detail = RejectReason(m)
		} else {
			reason, detail = DeadLetterReason(body, now)
		}
		s.ByReason[reason]++
		sent := SentAt(m)
		if !sent.IsZero() && (s.Oldest.IsZero() || sent.Before(s.Oldest)) {
			s.Oldest = sent
		}
		if sent.After(s.Newest) {
			s.Newest = sent
		}
		if len(s.Samples) < samples {
			n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
			s.Samples = append(s.Samples, Sample{MessageID: aws.ToString(m.MessageId), Sent: sent, Receives: n,
				Reason: reason, Detail: Printable(detail), Bytes: len(body), Body: Printable(body)})
		}
	}
	return s
}

// Inspect reads up to max messages of a queue (0: all) without consuming
// them (Peek) and summarises them, with the queue's depth. When the depth
// cannot be read it returns an empty Summary; when reading fails part way,
// the Summary of what it read, and the error.
func Inspect(ctx context.Context, c InspectAPI, kind Kind, url string, max, samples int, hold time.Duration, now time.Time) (Summary, error) {
	secs, err := holdSeconds(hold)
	if err != nil {
		return Summary{}, err
	}
	visible, _, err := Depth(ctx, c, url)
	if err != nil {
		return Summary{}, err
	}
	msgs, err := peek(ctx, c, url, max, secs, visible)
	s := Summarise(kind, url, msgs, samples, now)
	s.Approximate = visible
	return s, err
}
