package archivelambda_test

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
)

// poison makes record 4 of ten (index 3) unconvertible in three ways at once.
func poisonBatch() []events.DynamoDBEventRecord {
	b := archivetest.VoteBatch(0, 10)
	b[3].Change.NewImage["zz"] = events.NewStringSetAttribute(nil)
	b[3].Change.NewImage["aa"] = events.NewNumberAttribute("1,5")
	b[3].Change.OldImage = map[string]events.DynamoDBAttributeValue{"x": events.NewNumberAttribute("abc")}
	return b
}

func quarantined(t *testing.T, m *archivetest.MemS3) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, k := range m.Keys() {
		if strings.HasPrefix(k, archive.QuarantinePrefix) {
			o, err := m.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(o.Body)
			if err != nil {
				t.Fatal(err)
			}
			out[k] = b
		}
	}
	return out
}

// Ten records with the poison one fourth: nine archived, one quarantined
// whole with every reason in a stable order, no batch failure reported.
func TestPoisonRecordIsQuarantined(t *testing.T) {
	store := archivetest.NewMemS3()
	a := newArchiver(store, bucket, nil)
	a.Quarantine = archives3.Writer{S3: store, Bucket: bucket}
	batch := poisonBatch()
	resp, err := a.Handle(t.Context(), events.DynamoDBEvent{Records: batch})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want no failure", resp, err)
	}
	archived := archivedSequences(t, store)
	for i, r := range batch {
		if n, want := archived[r.Change.SequenceNumber], map[bool]int{true: 0, false: 1}[i == 3]; n != want {
			t.Errorf("record %d archived %d times, want %d", i, n, want)
		}
	}
	q := quarantined(t, store)
	if len(q) != 1 {
		t.Fatalf("quarantine holds %d objects, want 1", len(q))
	}
	for k, body := range q {
		if !strings.Contains(k, batch[3].Change.SequenceNumber) {
			t.Errorf("quarantine key %s does not name the sequence", k)
		}
		var got struct {
			Reasons []string
			Record  struct {
				EventID  string
				DynamoDB struct{ SequenceNumber string } `json:"dynamodb"`
			}
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Reasons) != 3 || !strings.HasPrefix(got.Reasons[0], "NewImage.aa:") ||
			!strings.HasPrefix(got.Reasons[1], "NewImage.zz:") || !strings.HasPrefix(got.Reasons[2], "OldImage.x:") {
			t.Errorf("reasons %q, want NewImage.aa, NewImage.zz, OldImage.x in that order", got.Reasons)
		}
		if got.Record.DynamoDB.SequenceNumber != batch[3].Change.SequenceNumber || got.Record.EventID != batch[3].EventID {
			t.Errorf("quarantined record %+v is not the poison record", got.Record)
		}
	}
	// The same batch again (a redelivery) changes nothing.
	before := store.Keys()
	if resp, err := a.Handle(t.Context(), events.DynamoDBEvent{Records: batch}); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("second Handle = %+v, %v", resp, err)
	}
	if after := store.Keys(); !reflect.DeepEqual(before, after) {
		t.Errorf("a redelivered batch wrote new keys: %v → %v", before, after)
	}
}

// S3 failing: the batch fails at the first record not archived (here the
// quarantine write of the poison record, after the first three were
// archived), and the retry from there completes it without duplicates.
func TestQuarantineFailureIsRetried(t *testing.T) {
	store := archivetest.NewMemS3()
	failing := true
	store.FailPut = func(key string) error {
		if failing && strings.HasPrefix(key, archive.QuarantinePrefix) {
			return errors.New("503 SlowDown")
		}
		return nil
	}
	a := newArchiver(store, bucket, nil)
	a.Quarantine = archives3.Writer{S3: store, Bucket: bucket}
	batch := poisonBatch()
	resp, _ := a.Handle(t.Context(), events.DynamoDBEvent{Records: batch})
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: batch[3].Change.SequenceNumber}}
	if !reflect.DeepEqual(resp.BatchItemFailures, want) {
		t.Fatalf("failures %+v, want %+v", resp.BatchItemFailures, want)
	}
	failing = false
	// Lambda retries from the failed record to the end of the batch.
	if resp, _ := a.Handle(t.Context(), events.DynamoDBEvent{Records: batch[3:]}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry failures %+v", resp.BatchItemFailures)
	}
	seen := archivedSequences(t, store)
	for i, r := range batch {
		n := seen[r.Change.SequenceNumber]
		if i == 3 && n != 0 || i != 3 && n != 1 {
			t.Errorf("record %d archived %d times", i, n)
		}
	}
	if q := quarantined(t, store); len(q) != 1 {
		t.Errorf("quarantine holds %d objects, want 1", len(q))
	}
}

// archivedSequences counts each sequence number in the archive's files
// (not the quarantine).
func archivedSequences(t *testing.T, m *archivetest.MemS3) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, k := range m.Keys() {
		if strings.HasPrefix(k, archive.QuarantinePrefix) {
			continue
		}
		rows, err := archives3.ReadRows(t.Context(), m, bucket, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			seen[r.SequenceNumber]++
		}
	}
	return seen
}

// A record no JSON could carry (a zero attribute value, on which
// aws-lambda-go's encoder panics) is still quarantined, as text.
func TestUnencodableRecordIsQuarantined(t *testing.T) {
	store := archivetest.NewMemS3()
	a := newArchiver(store, bucket, nil)
	a.Quarantine = archives3.Writer{S3: store, Bucket: bucket}
	batch := archivetest.VoteBatch(0, 3)
	batch[1].Change.NewImage = map[string]events.DynamoDBAttributeValue{"x": {}}
	res := a.Archive(t.Context(), batch)
	if res.Err != nil || res.Archived != 2 || len(res.Quarantined) != 1 {
		t.Fatalf("Archive = %d archived, %v quarantined, %v; want 2, 1, nil", res.Archived, res.Quarantined, res.Err)
	}
	for _, body := range quarantined(t, store) {
		var got struct {
			Reasons []string
			Record  string
		}
		if err := json.Unmarshal(body, &got); err != nil || !strings.Contains(got.Record, batch[1].Change.SequenceNumber) || len(got.Reasons) != 1 {
			t.Errorf("quarantined %s (%v)", body, err)
		}
	}
}
