package objectslambda_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// The reaper deletes real blob versions from the stream's old images, at a
// rate the test logs; a second delivery of the same batch is harmless.
func TestReaperThroughput(t *testing.T) {
	count := 500
	if testing.Short() {
		count = 50
	}
	e := newEnv(t)
	ctx := context.Background()
	batch := make([]events.DynamoDBEventRecord, count)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			body := []byte(fmt.Sprintf("payload %d", i))
			id := fmt.Sprintf("r%05d", i)
			ref, err := e.blobs.PutBlob(ctx, objects.Blob{Key: objects.BlobKey("docs/r", id), Body: body, SHA256: objects.SumOf(body), ObjectKey: "docs/r", WriteID: id})
			if err != nil {
				t.Error(err)
				return
			}
			old := s3Version("docs/r", i+1, ref.Key)
			old["blob"] = m(attrs{"bucket": s(e.bucket), "key": s(ref.Key), "versionId": s(ref.VersionID), "size": n(fmt.Sprint(ref.Size)), "sha256": s(ref.SHA256.String())})
			batch[i] = remove(old)
			batch[i].Change.SequenceNumber = fmt.Sprint(1e6 + i)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	r := e.reaper(t)
	start := time.Now()
	for lo := 0; lo < count; lo += 100 { // the mapping's BatchSize
		res := r.Reap(ctx, batch[lo:min(lo+100, count)])
		if res.Err != nil || res.Blobs != min(100, count-lo) {
			t.Fatalf("batch at %d: %d blobs, %v", lo, res.Blobs, res.Err)
		}
	}
	took := time.Since(start)
	t.Logf("reaped %d blobs in %s: %.0f records/s", count, took.Round(time.Millisecond), float64(count)/took.Seconds())
	if res := r.Reap(ctx, batch[:min(100, count)]); res.Err != nil {
		t.Fatalf("a second delivery: %v", res.Err)
	}
	if rep := e.check(t); len(rep.OrphanBlobs) != 0 {
		t.Fatalf("%d blob versions left", len(rep.OrphanBlobs))
	}
}
