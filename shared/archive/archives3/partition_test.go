package archives3_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// crashS3 fails the calls fail picks: a crash at that point of a compaction.
type crashS3 struct {
	*s3.Client
	fail func(op, key string) bool
}

var errCrash = errors.New("injected crash")

func (c crashS3) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if c.fail("put", aws.ToString(in.Key)) {
		return nil, errCrash
	}
	return c.Client.PutObject(ctx, in, opts...)
}

func (c crashS3) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	if c.fail("delete", "") {
		return nil, errCrash
	}
	return c.Client.DeleteObjects(ctx, in, opts...)
}

// A month of 6 archiver files compacts into one, with a manifest; a crash
// before the manifest, and one before the deletes, each leave an archive
// that replays to the same state, and the next Compact finishes the job.
func TestIntegrationCompactSurvivesCrashes(t *testing.T) {
	client, name := stacktest.Bucket(t, "archive-it")
	ctx := t.Context()
	// The month's files, as the archiver writes them.
	a := &archivelambda.Archiver{Files: archives3.Writer{S3: client, Bucket: name}, Log: slog.New(slog.DiscardHandler)}
	for b := range 6 {
		if resp, err := a.Handle(ctx, events.DynamoDBEvent{Records: archivetest.VoteBatch(b*100, 100)}); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch %d: %+v %v", b, resp, err)
		}
	}
	p := archive.Partition{Table: "ddbpipe-votes", Month: "2026-11"}
	parts := &archives3.Partitions{S3: client, Bucket: name}
	before, err := parts.Read(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Files) != 6 || before.Rows != 600 || len(before.State) != 600 || !before.Has(strings.TrimLeft(archivetest.VoteRecord(599).Change.SequenceNumber, "0")) {
		t.Fatalf("read %d files, %d rows, %d items", len(before.Files), before.Rows, len(before.State))
	}
	sameState := func(when string) {
		t.Helper()
		c, err := parts.Read(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if rep := archive.Verify(c.State, before.State); !rep.OK() {
			t.Errorf("%s: %s", when, rep)
		}
	}
	v := archive.Verification{At: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), TableItems: 600, ArchivedItems: 600, OK: true}

	// Crash after the merged file, before the manifest.
	crash := &archives3.Partitions{S3: crashS3{client, func(op, key string) bool { return op == "put" && strings.HasSuffix(key, "_manifest.json") }}, Bucket: name}
	if _, err := crash.Compact(ctx, p, archive.DefaultCompactionPolicy, "ddbpipe-votes-2026-11", v); !errors.Is(err, errCrash) {
		t.Fatalf("compact: %v, want the injected crash", err)
	}
	if files, _ := archives3.ListFiles(ctx, client, name, p.Prefix()); len(files) != 7 {
		t.Errorf("after a crash before the manifest: %d objects, want 7 (6 inputs and the merged file)", len(files))
	}
	sameState("crash before the manifest")

	// Crash after the manifest, before the deletes.
	crash = &archives3.Partitions{S3: crashS3{client, func(op, _ string) bool { return op == "delete" }}, Bucket: name}
	if _, err := crash.Compact(ctx, p, archive.DefaultCompactionPolicy, "ddbpipe-votes-2026-11", v); !errors.Is(err, errCrash) {
		t.Fatalf("compact: %v, want the injected crash", err)
	}
	sameState("crash before the deletes")
	// Both the stream's files and the month's state are there now: the
	// state's rows are the replayed ones, one per vote, which exact
	// queries keep.
	var all, replayed int
	for _, f := range mustList(t, client, name, p.Prefix()) {
		if !strings.HasSuffix(f.Key, ".parquet") {
			continue
		}
		rows, err := archives3.ReadRows(ctx, client, name, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			all++
			if r.Replayed {
				replayed++
			}
		}
	}
	if all != 1200 || replayed != 600 {
		t.Errorf("half-done compaction: %d rows, %d replayed; want 1200 and 600", all, replayed)
	}

	res, err := parts.Compact(ctx, p, archive.DefaultCompactionPolicy, "ddbpipe-votes-2026-11", v)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := archives3.ListFiles(ctx, client, name, p.Prefix())
	if len(files) != 2 || res.FilesAfter != 1 || res.Manifest.Rows != 600 {
		t.Errorf("after compaction: %d objects (want the merged file and the manifest), result %+v", len(files), res)
	}
	sameState("after compaction")
	after, _ := parts.Read(ctx, p)
	if after.Manifest == nil || !after.Manifest.Drift(after.Files).OK() || after.Manifest.Verification == nil || after.Manifest.SourceTable != "ddbpipe-votes-2026-11" {
		t.Errorf("manifest %+v does not describe the files %+v", after.Manifest, after.Files)
	}
	// Compacting again changes nothing but the manifest's time.
	again, err := parts.Compact(ctx, p, archive.DefaultCompactionPolicy, "ddbpipe-votes-2026-11", v)
	if err != nil || again.Merged != 0 || again.FilesAfter != 1 {
		t.Errorf("second compaction: %+v %v", again, err)
	}
}

func mustList(t *testing.T, client archives3.ListObjectsAPI, bucket, prefix string) []archive.File {
	t.Helper()
	files, err := archives3.ListFiles(t.Context(), client, bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A snapshot export's rows land as one file and replay over the stream's.
func TestIntegrationSnapshotWrite(t *testing.T) {
	client, name := stacktest.Bucket(t, "archive-it")
	ctx := t.Context()
	p := archive.Partition{Table: "ddbpipe-votes", Month: "2026-11"}
	parts := &archives3.Partitions{S3: client, Bucket: name}
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	key := `{"pk":{"S":"a"},"sk":{"S":"1"}}`
	img := `{"n":{"N":"1"},"pk":{"S":"a"},"sk":{"S":"1"}}`
	scan := archive.Scan{State: archive.State{key: archive.ChecksumJSON(img)}, Images: map[string]string{key: img}}
	rows, err := archive.SnapshotRows(p, scan, nil, at)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parts.Write(ctx, archive.SnapshotKey(p, at), rows)
	if err != nil || f.Rows != 1 {
		t.Fatalf("write: %+v %v", f, err)
	}
	c, err := parts.Read(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if rep := archive.Verify(c.State, scan.State); !rep.OK() {
		t.Error(rep)
	}
}
