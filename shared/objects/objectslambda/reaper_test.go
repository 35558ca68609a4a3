package objectslambda_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
)

// reapFunc is a fake of the domain's Reap.
type reapFunc func(ctx context.Context, r objects.Record) error

func (f reapFunc) Reap(ctx context.Context, r objects.Record) error { return f(ctx, r) }

var _ objects.Reaping = reapFunc(nil)

type attrs = map[string]events.DynamoDBAttributeValue

func s(v string) events.DynamoDBAttributeValue { return events.NewStringAttribute(v) }
func n(v string) events.DynamoDBAttributeValue { return events.NewNumberAttribute(v) }
func m(v attrs) events.DynamoDBAttributeValue  { return events.NewMapAttribute(v) }

const (
	sum    = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	bucket = "objects-bucket"
)

// s3Version is the old image of history item v<version> of key, in S3.
func s3Version(key string, version int, blobKey string) attrs {
	return attrs{
		"pk": s(key), "sk": s(fmt.Sprintf("v%010d", version)), "version": n(fmt.Sprint(version)),
		"kind": s("s3"), "size": n("4"), "sha256": s(sum), "contentType": s("text/plain"), "codec": s("identity"),
		"writeId": s("w1"), "blob": m(attrs{"bucket": s(bucket), "key": s(blobKey), "size": n("4"), "sha256": s(sum)}),
	}
}

func chunkedVersion(key string, version int, count, size string) attrs {
	return attrs{
		"pk": s(key), "sk": s(fmt.Sprintf("v%010d", version)), "version": n(fmt.Sprint(version)),
		"kind": s("chunked"), "size": n(size), "sha256": s(sum), "codec": s("identity"), "writeId": s("w2"),
		"manifest": m(attrs{"count": n(count), "chunkSize": n("4096"), "size": n(size), "sha256": s(sum)}),
	}
}

func with(a attrs, k string, v events.DynamoDBAttributeValue) attrs {
	out := attrs{}
	for key, val := range a {
		out[key] = val
	}
	if v.DataType() == events.DataTypeNull {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func remove(old attrs) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{EventName: "REMOVE", Change: events.DynamoDBStreamRecord{OldImage: old}}
}

// Hostile and malformed records each fail the batch at their own sequence
// number (never a crash, never a silent skip); records that free nothing
// are skipped; the records around them are reaped.
func TestReaperReportsBadRecordsBySequenceNumber(t *testing.T) {
	good := s3Version("docs/a", 3, "blobs/0123/w1")
	none := events.NewNullAttribute()
	tests := []struct {
		name string
		rec  events.DynamoDBEventRecord
		fail bool
		reap bool // Reap sees the record
	}{
		{name: "REMOVE without an old image", rec: events.DynamoDBEventRecord{EventName: "REMOVE"}, fail: true},
		{name: "no event name", rec: events.DynamoDBEventRecord{Change: events.DynamoDBStreamRecord{OldImage: good}}, fail: true},
		{name: "pk a number", rec: remove(with(good, "pk", n("7"))), fail: true},
		{name: "version not a number", rec: remove(with(good, "version", s("three"))), fail: true},
		{name: "version and sort key disagree", rec: remove(with(good, "version", n("4"))), fail: true},
		{name: "bad sha256", rec: remove(with(good, "sha256", s("zz"))), fail: true},
		{name: "blob not a map", rec: remove(with(good, "blob", s("blobs/x"))), fail: true},
		{name: "in S3 without a blob", rec: remove(with(good, "blob", none)), fail: true},
		{name: "blob without a key", rec: remove(with(good, "blob", m(attrs{"size": n("4")}))), fail: true},
		{name: "blob outside the prefixes", rec: remove(s3Version("docs/a", 3, "archive/2026/01.parquet")), fail: true},
		{name: "blob is a bare prefix", rec: remove(s3Version("docs/a", 3, "blobs/")), fail: true},
		{name: "blob in another bucket", rec: remove(with(good, "blob", m(attrs{"bucket": s("someone-else"), "key": s("blobs/0123/w1")}))), fail: true},
		{name: "chunked without a manifest", rec: remove(with(chunkedVersion("docs/c", 2, "2", "5000"), "manifest", none)), fail: true},
		{name: "manifest inconsistent", rec: remove(chunkedVersion("docs/c", 2, "9", "5000")), fail: true},
		{name: "manifest count not a number", rec: remove(chunkedVersion("docs/c", 2, "x", "5000")), fail: true},

		{name: "chunked history item", rec: remove(chunkedVersion("docs/c", 2, "2", "5000")), reap: true},
		{name: "finalized upload", rec: remove(s3Version("docs/u", 1, "uploads/0123/w9")), reap: true},
		{name: "inline history item", rec: remove(attrs{"pk": s("docs/i"), "sk": s("v0000000001"), "version": n("1"), "kind": s("inline"), "data": events.NewBinaryAttribute([]byte("x"))}), reap: true},
		{name: "REMOVE of v0", rec: remove(with(good, "sk", s("v0")))},
		{name: "REMOVE of a chunk item", rec: remove(attrs{"pk": s("docs/c#w2#00001"), "sk": s("c"), "data": events.NewBinaryAttribute([]byte("x"))})},
		{name: "REMOVE of a pending upload", rec: remove(attrs{"pk": s("docs/u"), "sk": s("upload#w9"), "expiresAt": n("1767225600")})},
		{name: "REMOVE of an unknown item", rec: remove(attrs{"pk": s("whatever"), "sk": s("zz")})},
		{name: "INSERT", rec: events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{NewImage: good}}},
		{name: "MODIFY", rec: events.DynamoDBEventRecord{EventName: "MODIFY", Change: events.DynamoDBStreamRecord{OldImage: good, NewImage: good}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var reaped []string
			r := &objectslambda.Reaper{Log: testLogger(t), Reaper: &objects.Reaper{Bucket: bucket, Store: reapFunc(func(_ context.Context, rec objects.Record) error {
				mu.Lock()
				defer mu.Unlock()
				reaped = append(reaped, fmt.Sprintf("%s v%d", rec.Key, rec.Version))
				return nil
			})}}
			batch := []events.DynamoDBEventRecord{remove(good), tt.rec, remove(s3Version("docs/b", 5, "blobs/4567/w1"))}
			for i := range batch {
				batch[i].EventID = fmt.Sprint("id", i)
				batch[i].Change.SequenceNumber = fmt.Sprint(1000 + i)
			}
			resp, err := r.Handle(context.Background(), events.DynamoDBEvent{Records: batch})
			if err != nil {
				t.Fatalf("Handle returned %v; failures are batch item failures", err)
			}
			var want []events.DynamoDBBatchItemFailure
			if tt.fail {
				want = []events.DynamoDBBatchItemFailure{{ItemIdentifier: "1001"}}
			}
			if fmt.Sprint(resp.BatchItemFailures) != fmt.Sprint(want) {
				t.Errorf("failures %v, want %v", resp.BatchItemFailures, want)
			}
			slices.Sort(reaped)
			wantReaped := []string{"docs/a v3", "docs/b v5"}
			if tt.reap {
				wantReaped = append(wantReaped, fmt.Sprintf("%s v%d", must(batch[1]).Key, must(batch[1]).Version))
				slices.Sort(wantReaped)
			}
			if fmt.Sprint(reaped) != fmt.Sprint(wantReaped) {
				t.Errorf("reaped %v, want %v", reaped, wantReaped)
			}
		})
	}
}

func must(r events.DynamoDBEventRecord) objects.Record {
	k := r.Change.OldImage["pk"].String()
	var v int64
	fmt.Sscanf(r.Change.OldImage["version"].Number(), "%d", &v)
	return objects.Record{Key: k, Version: v}
}

// A payload that cannot be deleted fails the batch at the first such
// record in stream order, even when later ones fail too.
func TestReaperReportsTheFirstFailedDelete(t *testing.T) {
	r := &objectslambda.Reaper{Log: testLogger(t), Reaper: &objects.Reaper{Bucket: bucket, Store: reapFunc(func(_ context.Context, rec objects.Record) error {
		if rec.Version%2 == 0 {
			return fmt.Errorf("injected: %w", objects.ErrThrottled)
		}
		return nil
	})}}
	var batch []events.DynamoDBEventRecord
	for v := 1; v <= 6; v++ {
		rec := remove(s3Version("docs/a", v, fmt.Sprintf("blobs/0123/w%d", v)))
		rec.Change.SequenceNumber = fmt.Sprint(500 + v)
		batch = append(batch, rec)
	}
	res := r.Reap(context.Background(), batch)
	if res.FailedAt != "502" || res.Failures != 3 || res.Blobs != 3 || res.Bytes != 12 || !errors.Is(res.Err, objects.ErrThrottled) {
		t.Errorf("got failedAt %q, %d failures, %d blobs, %d bytes, err %v; want 502, 3, 3, 12, throttled", res.FailedAt, res.Failures, res.Blobs, res.Bytes, res.Err)
	}
}
