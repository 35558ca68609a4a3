package votessqs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// Rejects keeps the messages the counter rejects on the rejects queue, one
// RejectMessage each, with the reason also in the message attribute
// ReasonAttribute (so a subscriber can filter without parsing the body).
type Rejects struct {
	client   BatchSendAPI
	queueURL string
	s        settings
}

var _ votes.RejectStore = (*Rejects)(nil)

// Limits and names of the rejects queue's messages.
const (
	// MaxRejectBody is how much of a rejected body is kept; the rest is
	// described by its size and SHA-256.
	MaxRejectBody = 64 << 10
	// maxRejectDetail bounds the detail, which is ours and short, in case.
	maxRejectDetail = 4 << 10
	// ReasonAttribute is the String message attribute holding the reason.
	ReasonAttribute = "rejectReason"
)

// NewRejects returns the reject store writing to queueURL through client.
// WithClock, WithMaxAttempts, WithBackoff and WithMaxBatchBytes apply.
func NewRejects(client BatchSendAPI, queueURL string, opts ...Option) *Rejects {
	return &Rejects{client: client, queueURL: queueURL, s: newSettings(opts)}
}

// RejectMessage is the body of a message on the rejects queue. The original
// body is in Body when it is valid UTF-8 (and fits, escaped, in a message:
// a body of control characters is sent in base64 instead), else in
// BodyBase64. Bodies over MaxRejectBody are cut, UTF-8 ones at a character
// boundary, with BodyTruncated set and the whole body's size and SHA-256.
type RejectMessage struct {
	MessageID     string       `json:"messageId"`
	Reason        votes.Reason `json:"reason"`
	Detail        string       `json:"detail"`
	RejectedAt    time.Time    `json:"rejectedAt"`
	Body          string       `json:"body,omitempty"`
	BodyBase64    []byte       `json:"bodyBase64,omitempty"`
	BodyTruncated bool         `json:"bodyTruncated,omitempty"`
	BodySize      int          `json:"bodySize,omitempty"`
	BodySHA256    string       `json:"bodySha256,omitempty"`
}

// KeptBody is the body as kept: the original, or its first bytes when
// BodyTruncated.
func (m RejectMessage) KeptBody() []byte {
	if m.BodyBase64 != nil {
		return m.BodyBase64
	}
	return []byte(m.Body)
}

// EncodeReject returns the rejects queue message body for r, rejected at at.
// It always fits in a message of MaxBatchBytes with its attribute.
func EncodeReject(r votes.Rejected, at time.Time) ([]byte, error) {
	m := RejectMessage{MessageID: r.MessageID, Reason: r.Reason, Detail: cutUTF8([]byte(r.Detail), maxRejectDetail), RejectedAt: at.UTC()}
	body := r.Body
	if len(body) > MaxRejectBody {
		sum := sha256.Sum256(body)
		m.BodyTruncated, m.BodySize, m.BodySHA256 = true, len(body), hex.EncodeToString(sum[:])
		if utf8.Valid(body) {
			body = []byte(cutUTF8(body, MaxRejectBody))
		} else {
			body = body[:MaxRejectBody]
		}
	}
	if utf8.Valid(body) {
		m.Body = string(body)
		out, err := encodeJSON(m)
		if err != nil || len(out) <= MaxBatchBytes-rejectAttrSize(r.Reason) {
			return out, err
		}
		m.Body = "" // escaping made it too large
	}
	m.BodyBase64 = body
	return encodeJSON(m)
}

func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("votessqs: encode: %w", err)
	}
	return sqsSafe(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// cutUTF8 returns at most n bytes of b, not splitting a character when b
// is valid UTF-8.
func cutUTF8(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return string(b[:i])
		}
	}
	return string(b[:n])
}

func rejectAttrs(reason votes.Reason) map[string]types.MessageAttributeValue {
	if reason == "" {
		reason = "unknown" // SQS refuses empty attribute values
	}
	return map[string]types.MessageAttributeValue{
		ReasonAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(reason))},
	}
}

func rejectAttrSize(reason votes.Reason) int { return messageSize("", rejectAttrs(reason)) }

// Reject stores each rejected message on the rejects queue. It returns an
// error when any could not be stored; the counter then leaves those
// messages on the votes queue, so none is lost (the others may be stored
// again when they come back).
func (r *Rejects) Reject(ctx context.Context, rs []votes.Rejected) error {
	if len(rs) == 0 {
		return nil
	}
	at := r.s.now()
	var failed []string
	var first error
	msgs := make([]message, 0, len(rs))
	ids := make([]string, 0, len(rs)) // message id of each message
	for _, rj := range rs {
		body, err := EncodeReject(rj, at)
		if err != nil {
			failed = append(failed, rj.MessageID)
			first = firstErr(first, fmt.Errorf("message %s: %w", rj.MessageID, err))
			continue
		}
		attrs := rejectAttrs(rj.Reason)
		msgs = append(msgs, message{body: string(body), attrs: attrs, size: messageSize(string(body), attrs)})
		ids = append(ids, rj.MessageID)
	}
	for i, o := range r.s.sendAll(ctx, r.client, r.queueURL, msgs) {
		if o.err != nil {
			failed = append(failed, ids[i])
			first = firstErr(first, fmt.Errorf("message %s: %w", ids[i], o.err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("votessqs: %d of %d rejects not stored on %s; first: %w", len(failed), len(rs), r.queueURL, first)
	}
	return nil
}

// firstErr keeps the first non-nil error.
func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
