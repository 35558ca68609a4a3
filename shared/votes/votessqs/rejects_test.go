package votessqs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/votes"
)

func decodeReject(t *testing.T, body []byte) RejectMessage {
	t.Helper()
	var m RejectMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("reject body is not JSON: %v\n%.200s", err, body)
	}
	return m
}

func TestEncodeReject(t *testing.T) {
	// 64 KiB minus one byte, then 'é': the cut falls inside the 'é'.
	straddle := []byte(strings.Repeat("a", MaxRejectBody-1) + strings.Repeat("é", 20000))
	invalid := append(bytes.Repeat([]byte{0xff}, 10), strings.Repeat("b", 100<<10)...)
	controls := bytes.Repeat([]byte{0x01}, MaxRejectBody)
	tests := []struct {
		name       string
		body       []byte
		wantString bool // kept in "body"; else in "bodyBase64"
		wantKept   []byte
		truncated  bool
	}{
		{"vote-like", []byte(`{"voteId":"1"}`), true, []byte(`{"voteId":"1"}`), false},
		{"empty", nil, true, nil, false},
		{"non-BMP", []byte("🗳️\ufffe"), true, []byte("🗳️\ufffe"), false},
		{"invalid UTF-8", []byte("a\xffb"), false, []byte("a\xffb"), false},
		{"exactly the limit", bytes.Repeat([]byte("c"), MaxRejectBody), true, bytes.Repeat([]byte("c"), MaxRejectBody), false},
		{"cut at a character", straddle, true, straddle[:MaxRejectBody-1], true},
		{"cut invalid", invalid, false, invalid[:MaxRejectBody], true},
		{"controls too large escaped", controls, false, controls, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := votes.Rejected{MessageID: "m-1", Body: tt.body, Reason: votes.ReasonMalformedJSON, Detail: "not JSON"}
			enc, err := EncodeReject(r, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if size := len(enc) + rejectAttrSize(r.Reason); size > MaxBatchBytes {
				t.Errorf("message is %d bytes, over %d", size, MaxBatchBytes)
			}
			if i := bytes.IndexFunc(enc, func(r rune) bool { return r < 0x20 || r >= 0xFFFE }); i >= 0 {
				t.Errorf("body holds a character SQS refuses at %d", i)
			}
			m := decodeReject(t, enc)
			if m.MessageID != "m-1" || m.Reason != votes.ReasonMalformedJSON || m.Detail != "not JSON" || !m.RejectedAt.Equal(testNow) {
				t.Errorf("envelope = %+v", m)
			}
			if got := m.BodyBase64 == nil; got != tt.wantString {
				t.Errorf("body as string = %t, want %t", got, tt.wantString)
			}
			if !bytes.Equal(m.KeptBody(), tt.wantKept) {
				t.Errorf("kept %d bytes, want %d", len(m.KeptBody()), len(tt.wantKept))
			}
			if m.BodyTruncated != tt.truncated {
				t.Errorf("bodyTruncated = %t, want %t", m.BodyTruncated, tt.truncated)
			}
			if tt.truncated {
				sum := sha256.Sum256(tt.body)
				if m.BodySize != len(tt.body) || m.BodySHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("bodySize %d bodySha256 %s, want %d and the whole body's", m.BodySize, m.BodySHA256, len(tt.body))
				}
				if tt.wantString && !utf8.ValidString(m.Body) {
					t.Error("the cut split a character")
				}
			}
		})
	}
}

func TestRejectsStoresEveryReject(t *testing.T) {
	q := newMemQueue(t)
	q.fail = func(call int, e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
		if call == 1 && aws.ToString(e.Id) == "1" {
			return &types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")}
		}
		return nil
	}
	b := &noBackoff{}
	store := NewRejects(q.api(), q.queueURL, WithClock(fixedClock(testNow)), WithBackoff(b.backoff))
	var rs []votes.Rejected
	for i := range 12 {
		rs = append(rs, votes.Rejected{MessageID: fmt.Sprintf("m-%d", i), Body: []byte(fmt.Sprintf("body %d", i)), Reason: votes.ReasonBadID, Detail: "has #"})
	}
	for i := range 5 { // cut to 64 KiB each: a fourth does not fit in a batch with three
		rs[i].Body = bytes.Repeat([]byte("x"), 100<<10)
	}
	if err := store.Reject(t.Context(), rs); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	if got, want := q.CallSizes(), []int{3, 1, 9}; !slices.Equal(got, want) {
		t.Errorf("batch sizes = %v, want %v (split by bytes, the failed entry retried alone)", got, want)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range q.messages {
		m := decodeReject(t, []byte(aws.ToString(e.MessageBody)))
		seen[m.MessageID] = true
		attr := e.MessageAttributes[ReasonAttribute]
		if aws.ToString(attr.DataType) != "String" || aws.ToString(attr.StringValue) != string(votes.ReasonBadID) {
			t.Errorf("%s: attribute %s = %s %s", m.MessageID, ReasonAttribute, aws.ToString(attr.DataType), aws.ToString(attr.StringValue))
		}
	}
	if len(seen) != 12 || len(q.messages) != 12 {
		t.Errorf("stored %d messages for %d rejects, want 12 for 12", len(q.messages), len(seen))
	}
}

func TestRejectsReportsWhatWasNotStored(t *testing.T) {
	q := newMemQueue(t)
	q.fail = func(call int, e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
		if aws.ToString(e.Id) == "1" {
			return &types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("KmsAccessDenied"), SenderFault: true}
		}
		return nil
	}
	store := NewRejects(q.api(), q.queueURL)
	err := store.Reject(t.Context(), []votes.Rejected{
		{MessageID: "m-0", Body: []byte("x"), Reason: votes.ReasonMalformedJSON},
		{MessageID: "m-1", Body: []byte("y"), Reason: votes.ReasonMalformedJSON},
	})
	var ee *EntryError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "m-1") || !strings.Contains(err.Error(), "1 of 2") {
		t.Errorf("Reject error %v, want 1 of 2 not stored, naming m-1", err)
	}
	if err := store.Reject(t.Context(), nil); err != nil || len(q.CallSizes()) != 1 {
		t.Errorf("Reject(nil) = %v after %d calls, want nil and no call", err, len(q.CallSizes()))
	}
}
